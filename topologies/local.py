"""The ``native`` topology: this host, no VMs, every rank under the local mpirun."""

from vnetbench.errors import UsageError
from vnetbench.mpi import usable_cpus

from .base import LaunchSpec, Realised

MAX_RANKS = 4096
BIND_CHOICES = ("core", "none")


def binding(ranks: int, cores: int, bind: str | None) -> tuple[list[str], dict[str, str], dict]:
    """mpirun arguments, MCA settings and notes for ``ranks`` ranks on ``cores`` cores.

    Ranks that fit are bound to a core each (unless --bind none); more ranks than cores
    oversubscribe, lose binding and must yield when idle, or busy-polling ranks starve each other.
    """
    oversubscribed = ranks > cores
    if bind not in (None, *BIND_CHOICES):
        raise UsageError(f"--bind: {bind!r} is not allowed; choose from {', '.join(BIND_CHOICES)}")
    if oversubscribed and bind == "core":
        raise UsageError(f"--bind: core binding needs ranks <= cores ({ranks} ranks, {cores} cores); "
                         "use --bind none")
    effective = bind or ("none" if oversubscribed else "core")
    args = ["--bind-to", effective]
    mca = {}
    notes = {"oversubscribed": oversubscribed, "bind": effective, "cores": cores}
    if oversubscribed:
        args += ["--map-by", ":OVERSUBSCRIBE"]
        mca["mpi_yield_when_idle"] = "1"
        notes["yield_when_idle"] = f"{ranks} ranks on {cores} cores: ranks yield the cpu when idle"
    return args, mca, notes


def mca_args(mca: dict[str, str]) -> list[str]:
    args = []
    for key, value in mca.items():
        args += ["--mca", key, value]
    return args


class NativeTopology:
    """The ``native`` preset without the spec model: importing pydantic would cost every
    ``vnetbench run`` a quarter of a second, for a topology that has nothing to validate."""

    backend = "local"
    vms = switches = hosts = ()
    scaled: dict = {}

    def __init__(self, preset: dict):
        self._data = {"version": 1, **{key: preset[key] for key in ("name", "description", "backend")},
                      "placement": preset.get("placement", "block")}
        self.name = preset["name"]

    def to_dict(self) -> dict:
        return dict(self._data)


class LocalRealised(Realised):
    backend = "local"

    def check_ranks(self, ranks: int) -> None:
        if ranks > MAX_RANKS:
            raise UsageError(f"--ranks: {ranks} is beyond what one host runs; allowed: 1 to {MAX_RANKS}")

    def launch(self, ranks: int, bind: str | None = None) -> LaunchSpec:
        self.check_ranks(ranks)
        args, mca, notes = binding(ranks, usable_cpus(), bind)
        return LaunchSpec(mpirun_args=["-n", str(ranks), *args, *mca_args(mca)], mca=mca, notes=notes)
