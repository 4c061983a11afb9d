"""Which path each pair of ranks takes on a topology, from its spec and placement alone (nothing is brought up).

A path is named by a key that calibrations are stored under and looked up by:

- ``host``: two ranks on this host without VMs (the local backend: shared memory);
- ``vm/BACKEND``: two ranks inside one VM (shared memory inside the VM);
- ``switch/BACKEND/KIND``: two VMs on one switch (KIND: bridge, ovs-netdev, macvlan, ...);
- ``uplink/BACKEND/KINDS/RATE[+DELAY]``: two VMs on different switches, through both switches' uplinks to the
  physical switch; RATE is the slower uplink's (``1gbit``), DELAY the two uplinks' added delays (``+200us``).

Ranks land on VMs as the launch places them (``topologies.launch.ranks.place``: in proportion to the VMs'
vCPUs, block or round-robin).
"""

from collections import namedtuple

from vnetbench.topologies.launch.ranks import place
from vnetbench.topologies.model import units


class Path(namedtuple("Path", "kind key backend switch_kinds rate delay_us")):
    """One pair's path: ``kind`` host|vm|switch|uplink, its calibration ``key``, the backend of its VMs, the kinds of
    the switches it crosses, the uplink rate (bits/s, None off uplinks) and the uplinks' added delay (us)."""

    __slots__ = ()

    def describe(self) -> str:
        if self.kind == "host":
            return "this host (shared memory)"
        if self.kind == "vm":
            return "inside one VM (shared memory)"
        if self.kind == "switch":
            return f"one switch ({self.switch_kinds[0]})"
        delay = f" +{self.delay_us} us" if self.delay_us else ""
        return f"across uplinks at {units.format_rate(self.rate)}{delay} ({'/'.join(self.switch_kinds)})"


def shaper(path: Path) -> tuple[float, int] | None:
    """(bytes per second, burst bytes) of the token bucket (tc tbf) that shapes ``path``'s uplinks where vnetbench
    emulates them on this host (thishost/fabric.py: every uplink both ways); None elsewhere."""
    if path.kind != "uplink" or path.backend not in ("netns", "qemu"):
        return None
    from vnetbench.topologies.thishost.fabric import tbf_burst

    return path.rate / 8.0, tbf_burst(path.rate)


def switch_kind(switch) -> str:
    """A switch's kind as a path names it: ``bridge``, ``ovs-netdev``, ``macvlan``."""
    kind = getattr(switch, "kind", None) or "bridge"
    datapath = getattr(switch, "datapath", None)
    return f"{kind}-{datapath}" if datapath else kind


def host_path() -> Path:
    return Path("host", "host", "local", (), None, None)


def vm_of_ranks(topology, ranks: int) -> list[int] | None:
    """The VM index of each rank, as the launch places them; None for a topology without VMs."""
    vms = list(getattr(topology, "vms", None) or ())
    if not vms:
        return None
    return place(ranks, [vm.vcpus for vm in vms], topology.placement)


def between(topology, vm_a, vm_b) -> Path:
    """The path between two VMs of ``topology`` (the same VM: inside it)."""
    backend = topology.backend
    if vm_a.name == vm_b.name:
        return Path("vm", f"vm/{backend}", backend, (), None, None)
    sw_a, sw_b = topology.switch(vm_a.switch), topology.switch(vm_b.switch)
    if sw_a.name == sw_b.name:
        kind = switch_kind(sw_a)
        return Path("switch", f"switch/{backend}/{kind}", backend, (kind,), None, None)
    kinds = tuple(sorted({switch_kind(sw_a), switch_kind(sw_b)}))
    rate = min(sw_a.uplink.rate, sw_b.uplink.rate)
    delay = (sw_a.uplink.delay or 0) + (sw_b.uplink.delay or 0)
    key = f"uplink/{backend}/{'+'.join(kinds)}/{units.format_rate(rate)}" + (f"+{delay}us" if delay else "")
    return Path("uplink", key, backend, kinds, rate, delay or None)


def classify(topology, ranks: int) -> dict[tuple[int, int], Path]:
    """The path of every unordered pair (a, b), a < b, of ``ranks`` ranks on ``topology``."""
    where = vm_of_ranks(topology, ranks)
    if where is None:
        if topology.backend != "local":
            from vnetbench.core.errors import UsageError

            raise UsageError(f"--topology: {topology.name} (backend {topology.backend}) has no VMs; calibrate and "
                             f"predict know the paths of this host (native) and of topologies of VMs")
        return {(a, b): host_path() for a in range(ranks) for b in range(a + 1, ranks)}
    vms = list(topology.vms)
    return {(a, b): between(topology, vms[where[a]], vms[where[b]]) for a in range(ranks) for b in range(a + 1, ranks)}


def kinds(topology, ranks: int) -> dict[str, Path]:
    """The distinct paths ``ranks`` ranks use on ``topology``, by key."""
    return {path.key: path for path in classify(topology, ranks).values()}


def representatives(topology) -> dict[str, tuple[int, Path]]:
    """Each path key the topology has between rank 0 and some other rank, with the smallest rank count whose last
    rank takes it from rank 0 (pingpong measures rank 0 <-> the last rank): what calibrate measures. A topology
    without VMs: the host path at 2 ranks."""
    where_max = max(2, len(getattr(topology, "vms", None) or ()))  # no more ranks than VMs: none oversubscribed
    found: dict[str, tuple[int, Path]] = {}
    for ranks in range(2, where_max + 1):
        path = classify(topology, ranks)[(0, ranks - 1)]
        found.setdefault(path.key, (ranks, path))
    return found


def load_topology(ref: str):
    """The topology ``ref`` names, as ``--topology`` loads it; a topology file that this host cannot build (VMs
    larger than its cpus or memory) is read by the spec model alone (names, switches, uplinks, placement are
    checked; sizes are not fitted to this host): its paths are known, it is never brought up."""
    from pathlib import Path

    from vnetbench import topologies
    from vnetbench.core.errors import SpecError

    try:
        return topologies.load(ref)
    except SpecError:
        if not Path(ref).is_file():
            raise
        from vnetbench.topologies.model import spec, validation

        data, lines = validation.read(Path(ref), ref, "a topology spec", spec.MAX_SPEC_BYTES, "a topology file")
        if not isinstance(data, dict) or data.get("backend", "netns") in ("local",) or not data.get("vms"):
            raise
        topology = spec.from_dict({k: v for k, v in data.items() if k != "scale_from"}, ref, lines)
        topology._buildable = False
        return topology
