"""How ranks are bound to cores on one host or in one VM: the one home of the rule every backend applies."""

from vnetbench.core.errors import UsageError

from vnetbench.topologies.base import MAX_RANKS

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
