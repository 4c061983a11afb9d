"""Topologies: specs (presets, YAML files, backend refs), validated, and the backends that realise them.

- ``load(ref)``: whatever a user typed as ``--topology`` -> a validated topology of some backend:
  a preset name, ``switch:KIND:REF`` (REF with every switch of that kind: ``--switch``), ``BACKEND:REST`` (``slurm:batch/2nodes-2switches``, ``hostfile:hosts.txt``), a YAML topology
  (its ``backend:`` field chooses), or a file a backend claims (an Open MPI hostfile, an Ansible inventory);
  ``SpecError``/``UsageError`` naming the file, line and field when it does not validate;
- ``realise(topology)``: bring it up (or attach to it if it is up) -> a ``Realised`` context manager whose
  ``launch(ranks)`` says how the launcher reaches each rank; leaving the context tears down what it brought
  up, and nothing else;
- ``backend(name)``: the class of a registered backend (the interface and how to add one: ``base``);
- ``PRESETS``: the study's six configurations by name.

Every form reaches a backend through the registry (``base``); nothing here names one. The spec model
(pydantic) is imported on first use: the launch agent imports this package once per VM and per run, and a
run on ``native`` needs none of it (the local backend's ``from_preset``).
"""

import re
from pathlib import Path

from vnetbench.core.errors import SpecError, UsageError

from .base import BACKENDS, Backend, LaunchSpec, Realised, backend, default_backend, names, ref_prefixes, register
from .launch.intent import Intent

_PREFIX = re.compile(r"([a-z][a-z0-9_-]{1,31}):(.*)", re.S)
# a top-level ``backend:`` line: the file may be a YAML topology that names its backend (load_file)
_NAMES_BACKEND = re.compile(r"^backend[ \t]*:", re.M)
# the head of a file read to tell what it is (a topology YAML or a file a backend claims)
SNIFF_BYTES = 1 << 20


def load(ref: str, what: str = "--topology"):
    """The topology ``ref`` names (see the module's docstring); ``what`` names where it was typed."""
    from .model.presets import PRESETS

    if ref in PRESETS:  # before any file: a preset's name is never a path to look at
        data = PRESETS[ref]
        return backend(data["backend"]).from_preset(ref, data)
    if ref.startswith("switch:") and not Path(ref).exists():
        from . import switches

        kind, _, inner = ref[len("switch:"):].partition(":")
        return switches.twin(load(inner, what), kind)
    prefixed = _PREFIX.fullmatch(ref)
    if prefixed and not Path(ref).exists():
        from .base import prefix_owner

        owner = prefix_owner(prefixed[1])
        if owner is None:
            raise UsageError(f"{what}: {ref!r}: no backend owns refs '{prefixed[1]}:...'; backends: "
                             f"{', '.join(names())}")
        return backend(owner, what).load(ref, what)
    path = Path(ref)
    if not path.is_file():
        if path.exists():
            raise UsageError(f"{what}: {ref}: not a regular file")
        if "/" in ref or ref.endswith((".yaml", ".yml")):
            raise UsageError(f"{what}: no such file: {ref}")
        raise UsageError(f"{what}: unknown topology {ref!r}; choose a preset ({', '.join(PRESETS)}), a YAML file "
                         f"or BACKEND:REF ({', '.join(f'{prefix}:' for prefix in ref_prefixes())})")
    return load_file(path, what)


def load_file(path: Path, what: str = "--topology"):
    """A topology file: a YAML topology whose ``backend:`` says which backend reads it, else a file a backend
    claims (a hostfile, an inventory)."""
    from .model import validation
    from vnetbench.core.files import read_text
    from .model.spec import MAX_SPEC_BYTES

    text = read_text(path, f"{what}: {path}", "a topology, hostfile or inventory", SNIFF_BYTES)
    size, parsed = len(text.encode()), None
    if _NAMES_BACKEND.search(text) and size <= MAX_SPEC_BYTES:
        try:
            parsed = validation.parse(text, str(path), "a topology file")
        except SpecError:  # not YAML, or not a well-formed topology: a backend may claim it, else parsed again below
            pass
    # a YAML mapping that names its backend is a topology file, which no backend claims (Backend.claims): it is read
    # without importing the other backends (the hosts backend's models: 50 ms, and seconds in a TCG guest) or
    # asking the installed distributions for plugins
    if not (parsed and isinstance(parsed[0], dict) and "backend" in parsed[0]):
        for name in names():
            cls = backend(name)
            if cls.claims(path, text):
                return cls.load(str(path), what)
    if size > MAX_SPEC_BYTES:
        raise SpecError(f"{path}: larger than {MAX_SPEC_BYTES >> 20} MiB; not a topology spec")
    data, lines = parsed or validation.parse(text, str(path), "a topology file")
    if not isinstance(data, dict):
        from .model.spec import from_dict

        return from_dict(data, source=str(path), lines=lines)  # the spec model's own error for a non-mapping
    chosen = data.get("backend", default_backend(data))
    if not isinstance(chosen, str) or chosen not in BACKENDS and chosen not in names():
        from .model.spec import from_dict

        return from_dict(data, source=str(path), lines=lines)  # the model names the field and what is allowed
    return backend(chosen).from_data(data, str(path), lines)


def file_backend(ref: str) -> str | None:
    """The backend of the topology file ``ref``, or None when ``ref`` is no file."""
    if not Path(ref).is_file():
        return None
    return load(ref).backend


def realise(topology) -> Realised:
    """Bring ``topology`` up with its backend (see ``base`` for the interface and the registry)."""
    return backend(topology.backend, f"topology {topology.name!r}: backend").realise(topology)


def __getattr__(name):
    if name == "Topology":
        from .model.spec import Topology

        return Topology
    if name == "PRESETS":
        from .model.presets import PRESETS

        return PRESETS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Backend", "Intent", "LaunchSpec", "PRESETS", "Realised", "Topology", "backend", "load", "load_file",
           "names", "realise", "register"]
