"""The switch fabric of a VM topology on this host: a bridge per switch, shaped uplinks, the head's address.

Shared by the backends whose VMs run on this host (netns, qemu): each plans, creates and removes its
topology's switches here and hands over its VMs' links (a veth into a namespace, a tap), which each switch's
driver puts on it. A switch is of a kind (switches/: a Linux bridge, Open vSwitch, macvlan); a switch with an
uplink joins the physical-switch bridge over a veth pair shaped by tc tbf both ways (after netem's delay, when
it has one), whatever its kind. The head (mpirun, on the host) takes the subnet's first address on the
physical switch, or on the only switch (on the bridge itself, or on a link of its own on a switch of another
kind); VM i the (i + 2)th. Pure planning and ip/tc lines, but for the few sysfs reads that say what exists.

Names (Linux interface names have at most 15 characters), with ID the topology's 4 hex digits: switches
``vnbIDs<n>``, the physical switch ``vnbIDp``, uplinks ``vnbIDu<n>a`` (switch side) / ``vnbIDu<n>b``
(physical side), the head's link ``vnbIDh`` (and its peer ``vnbIDg``) on a switch that is no bridge; a backend
names its VMs' links ``vnbID<letter><n>`` (state.ANY_LINK lists the letters).
"""

import ipaddress
from dataclasses import asdict, dataclass
from typing import ClassVar

from vnetbench.core.errors import LaunchError, SpecError, UsageError

from .. import switches
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
    kind: str = switches.DEFAULT
    datapath: str | None = None  # ovs: as the spec asks (auto, system, netdev); what was used: the state's facts

    @property
    def driver(self):
        return switches.driver(self.kind)


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

    def switch(self, name: str) -> SwitchPlan:
        return next(sw for sw in self.switches if sw.name == name)

    @property
    def head_switch(self) -> SwitchPlan | None:
        """The switch the head is on, when it is on one (else it is on the physical switch)."""
        return next((sw for sw in self.switches if self.head_bridge in (sw.bridge, head_link(self.id))), None)

    @property
    def head_is_bridge(self) -> bool:
        """Is the head's address on a Linux bridge (the physical switch, or a bridge switch) rather than on a
        link of its own?"""
        sw = self.head_switch
        return sw is None or sw.driver.is_bridge


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


def require_switches(topology, backend: str = "", guests: bool = False) -> None:
    """Refuse (UsageError, one line, nothing started) a switch whose kind this host cannot make, or, for a backend
    of QEMU ``guests``, a kind that cannot take a guest's link yet (its driver's ``takes_guests``)."""
    for i, sw in enumerate(topology.switches):
        kind = getattr(sw, "kind", switches.DEFAULT)
        driver = switches.driver(kind)
        if guests and not driver.takes_guests:
            able = [name for name in switches.names() if switches.driver(name).takes_guests]
            raise UsageError(f"{topology.locate('switches', i, 'kind')}: the {backend} backend does not take switches "
                             f"of kind {kind} yet ({driver.takes_guests_not}); allowed: {', '.join(able)}")
        driver.require(topology, i)


def names(topology_id: str) -> dict:
    """The prefixes of the fabric's interface names (and of a VM's own, ``vm_link``)."""
    p = f"{PREFIX}{topology_id}"
    return {"bridge": f"{p}s", "physical": f"{p}p", "uplink": f"{p}u", "vm_link": p}


def head_link(topology_id: str) -> str:
    """The head's own link on a switch that is no Linux bridge (its peer, where the switch needs one: ``g``)."""
    return f"{PREFIX}{topology_id}h"


def head_peer(topology_id: str) -> str:
    return f"{PREFIX}{topology_id}g"


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
    plans = []
    for i, sw in enumerate(topology.switches):
        kind = {"kind": getattr(sw, "kind", switches.DEFAULT), "datapath": getattr(sw, "datapath", None)}
        if sw.uplink is None:
            plans.append(SwitchPlan(sw.name, i, f"{n['bridge']}{i}", **kind))
        else:
            plans.append(SwitchPlan(sw.name, i, f"{n['bridge']}{i}", (f"{n['uplink']}{i}a", f"{n['uplink']}{i}b"),
                                    sw.uplink.rate, tbf_burst(sw.uplink.rate), sw.uplink.delay, **kind))
    with_vms = {vm.switch for vm in topology.vms}
    physical = n["physical"] if any(sw.uplink for sw in plans) else None
    # the head (mpirun, on the host) joins the physical switch, like a head node on the cluster's
    # switch; with one switch and no uplink it joins that switch: on the bridge itself, else on a link of its own
    lone = [sw for sw in plans if sw.name in with_vms]
    head_bridge = physical
    if len(lone) == 1 and not lone[0].uplink:
        head_bridge = lone[0].bridge if lone[0].driver.is_bridge else head_link(topology.id)
    return Fabric(id=topology.id, name=topology.name, subnet=str(subnet), head=str(next(subnet.hosts())),
                  head_bridge=head_bridge, physical=physical, switches=tuple(plans))


def vm_address(subnet: ipaddress.IPv4Network, index: int) -> str:
    """The address of the topology's VM number ``index`` (the head has the first)."""
    return str(subnet.network_address + 2 + index)


# ---- what ip and tc are told --------------------------------------------------------------

def link_lines(fab: Fabric, links) -> list[str]:
    """ip lines that put the backend's VM links on their switches: ``links`` are (switch, host link, netns, MAC),
    netns None for a QEMU guest's tap (made here, for its NIC's MAC), else the namespace that gets an ``eth0``."""
    lines = []
    for switch, link, netns, mac in links:
        driver = fab.switch(switch).driver
        lines += driver.tap_lines(fab.switch(switch), link, mac) if netns is None \
            else driver.vm_link_lines(fab.switch(switch), link, netns)
    return lines


def create(fab: Fabric, attach: list[str] = (), before: list[str] = (), links=()) -> dict:
    """Make the fabric with the backend's lines: the head's bridge first, numbered so that every MPI's launcher
    can match it (linux.add_bridge), then one ip batch of ``before``, the rest of the fabric, ``attach`` and
    the VMs' ``links`` (link_lines), then what each switch's driver does beyond ip (Open vSwitch's ports). The
    switches' facts for the state (switch name -> its driver's ``start``)."""
    if fab.head_is_bridge:
        linux.add_bridge(fab.head_bridge)
    linux.ip_batch([*before, *create_lines(fab, [*attach, *link_lines(fab, links)])])
    head_sw = fab.head_switch
    if not fab.head_is_bridge:
        # the head's own link, numbered as the head's bridge is (linux.add_bridge says why)
        lines = head_sw.driver.head_lines(head_sw, fab.head_bridge)
        linux.add_link(lines[0])
        linux.ip_batch([*lines[1:], f"addr add {fab.head}/{fab.prefixlen} dev {fab.head_bridge}"])
    facts = {}
    for sw in fab.switches:
        ports = [link for switch, link, _, _ in links if switch == sw.name and sw.driver.host_side]
        ports += [sw.uplink[0]] if sw.uplink else []
        spaces = [netns for switch, _, netns, _ in links if switch == sw.name and netns]
        facts[sw.name] = sw.driver.start(sw, ports, spaces, fab.head_bridge if sw is head_sw else None)
    return facts


def create_lines(fab: Fabric, attach: list[str] = ()) -> list[str]:
    """One ip batch, once the head's bridge exists: the switches and the physical switch, then ``attach`` (the
    backend's VM links, which need the switches), then the uplinks and the head's address (on a bridge)."""
    lines = []
    for sw in fab.switches:
        if sw.bridge == fab.head_bridge:
            lines.append(f"link set dev {sw.bridge} up")
        else:
            lines += sw.driver.create_lines(sw, fab.physical)
    if fab.physical:
        if fab.physical == fab.head_bridge:
            lines.append(f"link set dev {fab.physical} up")
        else:
            lines += [f"link add {fab.physical} type bridge", f"link set dev {fab.physical} up",
                      f"link set dev {fab.physical} arp off"]
    lines += list(attach)
    for sw in fab.switches:
        lines += sw.driver.uplink_lines(sw, fab.physical)
    if fab.head_is_bridge:
        lines.append(f"addr add {fab.head}/{fab.prefixlen} dev {fab.head_bridge}")
    return lines


def _tbf(sw: SwitchPlan):
    def lines(dev: str) -> list[str]:
        tbf = f"tbf rate {sw.rate}bit burst {sw.burst} latency {TBF_LATENCY}"
        if sw.delay:
            # netem delays (each direction, as a link's delay does), its child tbf shapes
            return [f"qdisc add dev {dev} root handle 1: netem delay {sw.delay}us limit 100000",
                    f"qdisc add dev {dev} parent 1:1 handle 10: {tbf}"]
        return [f"qdisc add dev {dev} root handle 1: {tbf}"]
    return lines


def shaping(fab: Fabric) -> list[str]:
    """One tc batch: tbf on both ends of every uplink, under netem where the uplink has a delay (each switch's
    driver says where its uplink's packets meet the kernel's qdiscs)."""
    return [line for sw in fab.switches if sw.uplink for line in sw.driver.shaping(sw, _tbf(sw))]


def _head_links(fab: Fabric) -> list[str]:
    return [] if fab.head_is_bridge else [fab.head_bridge, head_peer(fab.id)]


def remove_lines(fab: Fabric, present: set[str]) -> list[str]:
    """ip lines that delete the uplinks and switches of ``fab`` that exist (``present``: linux.links()), once each
    switch's driver removed what ip does not (an Open vSwitch bridge)."""
    lines = [f"link del {name}" for name in _head_links(fab) if name in present]
    for sw in fab.switches:
        lines += [line for line in sw.driver.remove(sw, present) if line not in lines]
    if fab.physical and fab.physical in present:
        lines.append(f"link del {fab.physical}")
    return lines


def released(fab: Fabric) -> None:
    """After a teardown's ip batch: each kind used stops what only its switches needed (OVS's own daemons)."""
    for kind in dict.fromkeys(sw.kind for sw in fab.switches):
        switches.driver(kind).released()


def describe_switches(layout: dict, facts: dict | None) -> list[dict]:
    """The record's ``topology.switches``: each switch's name, kind (and its driver's facts), uplink."""
    rows = []
    for data in layout["switches"]:
        sw = SwitchPlan(**{**data, "uplink": tuple(data["uplink"]) if data["uplink"] else None})
        rows.append({"name": sw.name, "bridge": sw.bridge, **sw.driver.describe(sw, (facts or {}).get(sw.name) or {}),
                     "uplink_rate": sw.rate, "tbf_burst": sw.burst, "delay_us": sw.delay})
    return rows


# ---- what exists ----------------------------------------------------------------------------

def leftovers(fab: Fabric, present: set[str]) -> list[str]:
    left = [name for name in _head_links(fab) if name in present]
    for sw in fab.switches:
        left += sw.driver.leftovers(sw, present)
    return left + ([fab.physical] if fab.physical in present else [])


def missing(fab: Fabric, present: set[str]) -> list[str]:
    return [name for sw in fab.switches for name in sw.driver.names(sw)[:1] if name not in present] + \
        ([fab.physical] if fab.physical and fab.physical not in present else [])


def health(fab: Fabric, vms_on: dict[str, list[str]]) -> tuple[str, list[str]] | None:
    """None while every switch and uplink is as it was brought up; else what broke and the VMs it cut off
    (``vms_on``: switch -> its VMs). A few sysfs reads."""
    for sw in fab.switches:
        cut = vms_on.get(sw.name, [])
        problem = sw.driver.health(sw)
        if problem:
            return f"switch {sw.name}'s {problem}", cut
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


def orphan_switches(known_ids: set[str]) -> list[str]:
    """What each switch kind made beyond interfaces for no topology in ``known_ids`` (an Open vSwitch bridge, a
    daemon nothing uses), removed; phrases of what went. Before orphan_links: an OVS bridge's ports are links."""
    return [phrase for kind in switches.names() for phrase in switches.driver(kind).orphans(known_ids)]


def switch_table(topology) -> tuple[list[str], list[list]]:
    """``topology show``'s table of a topology's switches: each one's kind (and datapath), its uplink's rate and
    delay."""
    from vnetbench.topologies.model.units import format_rate

    rows = []
    for sw in topology.switches:
        kind = getattr(sw, "kind", switches.DEFAULT)
        kind += f" ({sw.datapath} datapath)" if getattr(sw, "datapath", None) else ""
        if sw.uplink is None:
            rows.append([sw.name, kind, "-", "-"])
        else:
            delay = f"{sw.uplink.delay} us" if sw.uplink.delay else "-"
            rows.append([sw.name, kind, f"{format_rate(sw.uplink.rate)} (tc tbf, both ways)", delay])
    return ["SWITCH", "KIND", "UPLINK TO THE PHYSICAL SWITCH", "DELAY"], rows


def kinds_here(topology) -> list[str]:
    """``topology show``'s line per switch kind the topology uses: what this host can do with it."""
    used = dict.fromkeys(getattr(sw, "kind", switches.DEFAULT) for sw in topology.switches)
    return [f"switch kind {kind}: {switches.driver(kind).abilities()}" for kind in used]
