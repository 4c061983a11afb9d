"""The ``native`` topology: this host, no VMs, every rank under the local mpirun."""

from vnetbench.errors import UsageError

from .base import MAX_RANKS, LaunchSpec, Realised, register
from .host import usable_cpus
from .intent import Intent

BIND_CHOICES = ("core", "none")


def binding(ranks: int, cores: int, bind: str | None) -> tuple[dict[str, str], dict]:
    """MCA settings and notes for ``ranks`` ranks on ``cores`` cores; ``notes["bind"]`` is the binding
    and ``notes["oversubscribed"]`` whether ranks outnumber cores.

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
    mca = {}
    notes = {"oversubscribed": oversubscribed, "bind": effective, "cores": cores}
    if oversubscribed:
        mca["mpi_yield_when_idle"] = "1"
        notes["yield_when_idle"] = f"{ranks} ranks on {cores} cores: ranks yield the cpu when idle"
    return mca, notes


def check_ranks(ranks: int, what: str = "is out of range") -> None:
    if not 1 <= ranks <= MAX_RANKS:
        raise UsageError(f"--ranks: {ranks} {what}; allowed: 1 to {MAX_RANKS}")


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
        self.description = preset["description"]
        self.source = f"preset {self.name}"

    def to_dict(self) -> dict:
        return dict(self._data)


@register("local")
class LocalRealised(Realised):
    @classmethod
    def show(cls, topology, preview: dict) -> list:
        return ["backend local: ranks run on this host under mpirun, no VMs"]

    @classmethod
    def planned_bind(cls, topology, ranks: int, bind: str | None) -> str | None:
        return binding(ranks, usable_cpus(), bind)[1]["bind"]

    def check_ranks(self, ranks: int) -> None:
        check_ranks(ranks, "is beyond what one host runs")

    def launch(self, ranks: int, bind: str | None = None) -> LaunchSpec:
        self.check_ranks(ranks)
        mca, notes = binding(ranks, usable_cpus(), bind)
        intent = Intent(ranks=ranks, bind=notes["bind"], oversubscribe=notes["oversubscribed"], mca=mca)
        return LaunchSpec(intent=intent, notes=notes)
