"""What every topology backend gives the launcher: mpirun arguments and where each rank must land."""

from dataclasses import dataclass, field


@dataclass
class LaunchSpec:
    """How to start ``ranks`` ranks on a realised topology.

    ``mpirun_args`` go between ``mpirun`` and the program; ``env`` is added to mpirun's
    environment; ``mca`` is what the record reports as the MCA settings used (also present in
    args or env); ``expected_placement[i]`` is what rank i must see of itself (hostname,
    address, cpus: checked on the rank); ``placement_labels[i]`` is what the topology says of
    rank i (vm, switch, ...), merged into the record's placement; ``notes`` are facts the
    record keeps (oversubscribed, yield_when_idle and why).
    """

    mpirun_args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    mca: dict[str, str] = field(default_factory=dict)
    expected_placement: list[dict] | None = None
    placement_labels: list[dict] | None = None
    notes: dict = field(default_factory=dict)


class Realised:
    """A topology that is up and can launch ranks. Backends subclass it."""

    backend = "abstract"

    def __init__(self, topology):
        self.topology = topology

    @property
    def name(self) -> str:
        return self.topology.name

    def describe(self) -> dict:
        """The record's ``topology`` field."""
        return {"name": self.topology.name, "backend": self.backend, "spec": self.topology.to_dict()}

    def launch(self, ranks: int, bind: str | None = None) -> LaunchSpec:
        raise NotImplementedError

    def check_ranks(self, ranks: int) -> None:
        """Raise UsageError when ``ranks`` cannot be placed on this topology."""

    def close(self) -> None:
        """Tear down what this object brought up (nothing, for a topology that was already up)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
