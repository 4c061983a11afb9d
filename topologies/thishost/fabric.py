"""The switch fabric of a VM topology on this host: a bridge per switch, shaped uplinks, the head's address.

Shared by the backends whose VMs run on this host (netns; the coming qemu): each plans, creates and
removes its topology's switches here and attaches its VMs to their bridges its own way (a veth into a
namespace, a tap). A switch is a Linux bridge; a switch with an uplink joins the physical-switch bridge
over a veth pair shaped by tc tbf both ways (after netem's delay, when it has one). The head (mpirun, on
the host) takes the subnet's first address on the physical switch, or on the only switch; VM i the
(i + 2)th. Pure planning and ip/tc lines, but for the few sysfs reads that say what exists.

Names (Linux interface names have at most 15 characters), with ID the topology's 4 hex digits: bridges
``vnbIDs<n>``, the physical switch ``vnbIDp``, uplinks ``vnbIDu<n>a`` (switch side) / ``vnbIDu<n>b``
(physical side); a backend names its VMs' links ``vnbID<letter><n>`` (state.ANY_LINK lists the letters).
"""

import ipaddress
from dataclasses import asdict, dataclass
from typing import ClassVar

from vnetbench.core.errors import LaunchError, SpecError

from . import linux, state
from .host import RESERVED

PREFIX = "vnb"
SUBNET_POOL = ipaddress.IPv4Network("10.213.0.0/16")

# tbf must pass a whole GSO super-packet (64 KiB) in one go, or it drops or splits it; Mininet's
# 15 KB cuts 1 Gbit/s to a fraction. Two packets, or 2 ms at the rate, whichever is more.
TBF_MIN_BURST = 128 << 10
TBF_BURST_SECONDS = 0.002
TBF_LATENCY = "20ms"


@dataclass(frozen=True)
class SwitchPlan:
    name: str
    index: int
    bridge: str
    uplink: tuple[str, str] | None = None
    rate: int | None = None
    burst: int | None = None
    delay: int | None = None


@dataclass(frozen=True)
class Fabric:
    """A topology's switches as this host realises them (a backend's layout carries these fields)."""

    id: str
    name: str
    subnet: str
    head: str
    head_bridge: str
    physical: str | None
    switches: tuple[SwitchPlan, ...]

    @property
    def prefixlen(self) -> int:
        return ipaddress.IPv4Network(self.subnet).prefixlen

    @property
    def bridges(self) -> list[str]:
        return [sw.bridge for sw in self.switches] + ([self.physical] if self.physical else [])

    @property
    def uplinks(self) -> list[str]:
        """The switch-side end of each uplink (deleting it deletes its peer)."""
        return [sw.uplink[0] for sw in self.switches if sw.uplink]

    def bridge_of(self, switch: str) -> str:
        return next(sw.bridge for sw in self.switches if sw.name == switch)


@dataclass(frozen=True)
class HostLayout(Fabric):
    """A topology laid out on this host: its fabric, and its VMs as a backend plans them (``VM``, a frozen
    dataclass with ``name``, ``cpus`` and ``mems``). The backends whose VMs live here (netns, qemu) subclass it
    with their VM plan and fields of their own; it is what their state file keeps."""

    VM: ClassVar[type]
    placement: str
    vms: tuple
    host_cpus: tuple[int, ...]

    @property
    def fabric(self) -> Fabric:
        """The switches, uplinks and head of this layout (this module creates and removes them)."""
        return Fabric(self.id, self.name, self.subnet, self.head, self.head_bridge, self.physical, self.switches)

    def vm(self, name: str):
        return next(vm for vm in self.vms if vm.name == name)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict):
        vms = tuple(cls.VM(**{**vm, "cpus": tuple(vm["cpus"]), "mems": tuple(vm["mems"])}) for vm in data["vms"])
        switches = tuple(SwitchPlan(**{**sw, "uplink": tuple(sw["uplink"]) if sw["uplink"] else None})
                         for sw in data["switches"])
        return cls(**{**data, "vms": vms, "switches": switches, "host_cpus": tuple(data["host_cpus"])})


def require_netem(topology) -> None:
    """Refuse an uplink with a delay on a kernel without tc netem (SpecError naming the field)."""
    for i, sw in enumerate(topology.switches):
        if sw.uplink and sw.uplink.delay is not None and not linux.has_netem():
            raise SpecError(f"{topology.locate('switches', i, 'uplink', 'delay')}: delay needs tc netem, which "
                            f"this kernel lacks (sch_netem); remove delay, or run on a kernel with netem")


def names(topology_id: str) -> dict:
    """The prefixes of the fabric's interface names (and of a VM's own, ``vm_link``)."""
    p = f"{PREFIX}{topology_id}"
    return {"bridge": f"{p}s", "physical": f"{p}p", "uplink": f"{p}u", "vm_link": p}


def tbf_burst(rate_bits: int) -> int:
    return max(TBF_MIN_BURST, int(rate_bits / 8 * TBF_BURST_SECONDS))


def choose_subnet(topology_id: str, taken, pool: ipaddress.IPv4Network = SUBNET_POOL) -> ipaddress.IPv4Network:
    """A free /24 of ``pool``, starting from one derived from the id so that it is stable."""
    blocks = list(pool.subnets(new_prefix=24)) if pool.prefixlen <= 24 else [pool]
    start = int(topology_id, 16) % len(blocks)
    for k in range(len(blocks)):
        block = blocks[(start + k) % len(blocks)]
        if not any(block.overlaps(net) for net in (*RESERVED, *taken)):
            return block
    raise LaunchError(f"no free /24 left in {pool} for a topology subnet; give one with 'subnet:'")


def plan(topology, subnet: ipaddress.IPv4Network) -> Fabric:
    """The switches of ``topology`` (a validated spec topology) on ``subnet``."""
    n = names(topology.id)
    switches = []
    for i, sw in enumerate(topology.switches):
        if sw.uplink is None:
            switches.append(SwitchPlan(sw.name, i, f"{n['bridge']}{i}"))
        else:
            switches.append(SwitchPlan(sw.name, i, f"{n['bridge']}{i}", (f"{n['uplink']}{i}a", f"{n['uplink']}{i}b"),
                                       sw.uplink.rate, tbf_burst(sw.uplink.rate), sw.uplink.delay))
    with_vms = {vm.switch for vm in topology.vms}
    physical = n["physical"] if any(sw.uplink for sw in switches) else None
    # the head (mpirun, on the host) joins the physical switch, like a head node on the cluster's
    # switch; with one switch and no uplink it joins that switch
    lone = [sw for sw in switches if sw.name in with_vms]
    head_bridge = lone[0].bridge if len(lone) == 1 and not lone[0].uplink else physical
    return Fabric(id=topology.id, name=topology.name, subnet=str(subnet), head=str(next(subnet.hosts())),
                  head_bridge=head_bridge, physical=physical, switches=tuple(switches))


def vm_address(subnet: ipaddress.IPv4Network, index: int) -> str:
    """The address of the topology's VM number ``index`` (the head has the first)."""
    return str(subnet.network_address + 2 + index)


# ---- what ip and tc are told --------------------------------------------------------------

def create(fab: Fabric, attach: list[str] = (), before: list[str] = ()) -> None:
    """Make the fabric with the backend's lines: the head's bridge first, numbered so that every MPI's launcher
    can match it (linux.add_bridge), then one ip batch of ``before``, the rest of the fabric and ``attach``."""
    linux.add_bridge(fab.head_bridge)
    linux.ip_batch([*before, *create_lines(fab, attach)])


def create_lines(fab: Fabric, attach: list[str] = ()) -> list[str]:
    """One ip batch, once the head's bridge exists: the other bridges, then ``attach`` (the backend's VM links,
    which need the bridges), then the uplinks and the head's address."""
    lines = []
    for bridge in fab.bridges:
        if bridge == fab.head_bridge:
            lines.append(f"link set dev {bridge} up")
        else:
            lines += [f"link add {bridge} type bridge", f"link set dev {bridge} up"]
            # a switch is no host: without this, this host's stack answered a VM's ARP for the head's address
            # on the VM's own switch (Linux answers for any of its addresses on any interface), and the VM's
            # packets to the head went up there, past the shaped and delayed uplink (one way of a round trip)
            lines.append(f"link set dev {bridge} arp off")
    lines += list(attach)
    for sw in fab.switches:
        if sw.uplink:
            inner, outer = sw.uplink
            lines += [f"link add {inner} type veth peer name {outer}",
                      f"link set dev {inner} master {sw.bridge} up",
                      f"link set dev {outer} master {fab.physical} up"]
    lines.append(f"addr add {fab.head}/{fab.prefixlen} dev {fab.head_bridge}")
    return lines


def shaping(fab: Fabric) -> list[str]:
    """One tc batch: tbf on both ends of every uplink, under netem where the uplink has a delay."""
    lines = []
    for sw in fab.switches:
        if not sw.uplink:
            continue
        for dev in sw.uplink:
            tbf = f"tbf rate {sw.rate}bit burst {sw.burst} latency {TBF_LATENCY}"
            if sw.delay:
                # netem delays (each direction, as a link's delay does), its child tbf shapes
                lines += [f"qdisc add dev {dev} root handle 1: netem delay {sw.delay}us limit 100000",
                          f"qdisc add dev {dev} parent 1:1 handle 10: {tbf}"]
            else:
                lines.append(f"qdisc add dev {dev} root handle 1: {tbf}")
    return lines


def remove_lines(fab: Fabric, present: set[str]) -> list[str]:
    """ip lines that delete the uplinks and bridges of ``fab`` that exist (``present``: linux.links())."""
    return [f"link del {name}" for name in fab.uplinks + fab.bridges if name in present]


# ---- what exists ----------------------------------------------------------------------------

def leftovers(fab: Fabric, present: set[str]) -> list[str]:
    return [name for name in fab.bridges + fab.uplinks if name in present]


def missing(fab: Fabric, present: set[str]) -> list[str]:
    return [bridge for bridge in fab.bridges if bridge not in present]


def health(fab: Fabric, vms_on: dict[str, list[str]]) -> tuple[str, list[str]] | None:
    """None while every switch and uplink is as it was brought up; else what broke and the VMs it cut off
    (``vms_on``: switch -> its VMs). A few sysfs reads."""
    for sw in fab.switches:
        cut = vms_on.get(sw.name, [])
        problem = linux.link_problem(sw.bridge, carrier=False)
        if problem:
            return f"switch {sw.name}'s bridge {sw.bridge} {problem}", cut
        for dev in sw.uplink or ():
            problem = linux.link_problem(dev)
            if problem:
                return f"switch {sw.name} lost its uplink: {dev} {problem}", cut
    if fab.physical:
        problem = linux.link_problem(fab.physical, carrier=False)
        if problem:
            return f"the physical switch {fab.physical} {problem}", [vm for vms in vms_on.values() for vm in vms]
    return None


def orphan_links(known_ids: set[str]) -> list[str]:
    """Interfaces with vnetbench's names (bridges, uplinks, VM links) of no topology in ``known_ids``."""
    found = (state.ANY_LINK.fullmatch(name) for name in linux.links())
    return sorted(m.group(0) for m in found if m and m.group(1) not in known_ids)


def switch_table(topology) -> tuple[list[str], list[list]]:
    """``topology show``'s table of a topology's switches: each uplink's rate and delay."""
    from vnetbench.topologies.model.units import format_rate

    rows = []
    for sw in topology.switches:
        if sw.uplink is None:
            rows.append([sw.name, "-", "-"])
        else:
            delay = f"{sw.uplink.delay} us" if sw.uplink.delay else "-"
            rows.append([sw.name, f"{format_rate(sw.uplink.rate)} (tc tbf, both ways)", delay])
    return ["SWITCH", "UPLINK TO THE PHYSICAL SWITCH", "DELAY"], rows
