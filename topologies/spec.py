"""Topology specs. (Placeholder until the topology issue: only the built-in 'native'.)"""

from dataclasses import dataclass

from vnetbench.errors import UsageError


@dataclass(frozen=True)
class Topology:
    name: str
    backend: str = "local"

    def to_dict(self) -> dict:
        return {"name": self.name, "backend": self.backend}


def load_topology(ref: str) -> Topology:
    if ref == "native":
        return Topology("native")
    raise UsageError(f"--topology: unknown topology {ref!r}; choose from native")
