"""Topologies: specs (presets or YAML), validated, and the backends that realise them.

- ``load(ref)``: a preset name or a YAML file -> a frozen, validated ``Topology``;
- ``realise(topology)``: bring it up (or attach to it if it is up) -> a ``Realised`` context
  manager whose ``launch(ranks)`` says how mpirun reaches each rank.
"""

from .base import LaunchSpec, Realised
from .spec import Topology, load_topology

BACKENDS = {
    "local": "local:LocalRealised",
}


def load(ref: str) -> Topology:
    return load_topology(ref)


def realise(topology: Topology) -> Realised:
    import importlib

    module, cls = BACKENDS[topology.backend].split(":")
    return getattr(importlib.import_module(f".{module}", __name__), cls)(topology)


__all__ = ["LaunchSpec", "Realised", "Topology", "load", "realise"]
