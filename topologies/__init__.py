"""Topologies: specs (presets or YAML), validated, and the backends that realise them.

- ``load(ref)``: a preset name or a YAML file -> a frozen, validated ``Topology``
  (``SpecError`` naming the file, line and field when it does not validate);
- ``realise(topology)``: bring it up (or attach to it if it is up) -> a ``Realised`` context
  manager whose ``launch(ranks)`` says how mpirun reaches each rank; leaving the context
  tears down what it brought up, and nothing else;
- ``backend(name)``: the class of a registered backend (the interface and how to add one: ``base``);
- ``PRESETS``: the study's six configurations by name.

The spec model (pydantic) is imported on first use: the launch agent imports this package
once per VM and per run, and must start fast.
"""

from .base import LaunchSpec, Realised, backend, names, register
from .intent import Intent


def load(ref: str, what: str = "--topology"):
    if ref == "native":  # the preset; a file must be given as a path
        from .local import NativeTopology
        from .presets import PRESETS

        return NativeTopology(PRESETS["native"])
    from . import slurm

    if slurm.is_slurm(ref):  # slurm:PARTITION or a YAML file with backend: slurm
        return slurm.load(ref, what=what)
    from .spec import load_topology

    return load_topology(ref, what=what)


def realise(topology) -> Realised:
    """Bring ``topology`` up with its backend (see ``base`` for the interface and the registry)."""
    return backend(topology.backend, f"topology {topology.name!r}: backend")(topology)


def __getattr__(name):
    if name == "Topology":
        from .spec import Topology

        return Topology
    if name == "PRESETS":
        from .presets import PRESETS

        return PRESETS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Intent", "LaunchSpec", "PRESETS", "Realised", "Topology", "backend", "load", "names", "realise",
           "register"]
