"""Switch kinds: what a topology's switch is on this host - a Linux bridge, Open vSwitch, macvlan - one driver each.

A kind is one module of this package holding one subclass of ``Driver`` decorated ``@KINDS.register("NAME")``,
and one line in ``MODULES`` below; nothing else in vnetbench names it. thishost/fabric.py plans a topology's switches
(``SwitchPlan``: its names, its uplink's rate) and asks each switch's driver to make it, to put the VMs' links
on it, to shape its uplink, to check, describe and remove it, and to find what crashed runs left. The physical
switch the uplinks join is always a Linux bridge: it stands for the cluster's hardware switch, not for a
virtual switch under study.

A driver works on names thishost/fabric.py gives (state.ANY_LINK): the switch ``vnbIDs<n>``, its uplink's ends
``vnbIDu<n>a`` (switch side) / ``vnbIDu<n>b`` (physical side), the VMs' links a backend names, and, where the
head (mpirun) sits on a switch that is not a Linux bridge, the head's own link ``vnbIDh`` (with its peer
``vnbIDg`` where the switch needs one).
"""

from vnetbench.core.registry import Registry

DEFAULT = "bridge"
# name -> module of this package; the order is the order of listings (topology show, --switch's choices)
MODULES = {"bridge": "bridge", "ovs": "ovs", "macvlan": "macvlan"}
KINDS = Registry("kind", MODULES, package=__name__, noun="switch kind", attribute="kind", registers=True)


def names() -> tuple[str, ...]:
    return KINDS.names()


def driver(kind: str | None, what: str = "kind"):
    """The driver class of switch kind ``kind`` (None: the default); UsageError naming the kinds."""
    return KINDS.load(kind or DEFAULT, what)


def twin(topology, kind: str):
    """``topology`` with every switch of kind ``kind`` (``--switch``), named NAME-KIND so that its records, its
    state and its VMs' hostnames never mix with the topology's own; as it is when it has no switch, or when
    every switch already is of that kind. UsageError for a topology whose switches are not on this host."""
    from vnetbench.core.errors import UsageError

    from .. import base

    driver(kind, "--switch")
    if not getattr(topology, "switches", None):
        return topology
    if topology.backend not in ON_THIS_HOST:
        raise UsageError(f"--switch: {topology.name} is a topology of the {topology.backend} backend, whose switches "
                         f"are real; --switch applies to topologies of VMs on this host ({', '.join(ON_THIS_HOST)})")
    if all(sw.kind == kind for sw in topology.switches):
        return topology
    name = f"{topology.name}-{kind}"
    if len(name) > 32:
        raise UsageError(f"--switch: {topology.name}: its name is too long for its twin {name!r} (32 characters at "
                         f"most); shorten it, or write the kinds in the topology's file")
    data = topology.to_dict()
    data["name"] = name
    data["switches"] = [{**{key: value for key, value in sw.items() if key not in ("kind", "datapath")},
                         **({} if kind == DEFAULT else {"kind": kind})} for sw in data["switches"]]
    made = base.backend(topology.backend).from_data(data, topology.source)
    made._scaled = topology.scaled
    return made


ON_THIS_HOST = ("netns", "qemu")  # the backends whose switches this package makes


class Driver:
    """A switch kind. Class methods only: a switch's facts are its ``SwitchPlan`` (``sw``, frozen, in the state
    file) and what ``start`` returned (``facts``, kept in the state beside it). Lines are ip/tc batch lines."""

    kind = "?"
    # do a VM's links have an end on this host that the backend names (a veth's peer, a tap)? A macvlan is made
    # in the VM's namespace and has none
    host_side = True
    # is the switch a Linux bridge, on which the head's address can sit itself?
    is_bridge = False
    # the datapath a switch of this kind takes when its spec names none (None: the kind has no datapaths)
    datapath_default = None
    # can a QEMU guest's link (``tap_lines``) be put on it, and if not why
    takes_guests = True
    takes_guests_not = ""
    # is a guest's link a character device (/dev/tapIFINDEX) its QEMU is handed open (``-netdev tap,fd=N``), not a
    # tun/tap interface QEMU attaches to by name (``ifname=``)?
    tap_is_device = False

    @classmethod
    def require(cls, topology, index: int) -> None:
        """UsageError (one line, nothing started) unless this host can make switch ``index`` of ``topology``."""

    @classmethod
    def abilities(cls) -> str:
        """What this host can do with this kind, for ``topology show``."""
        return "available"

    @classmethod
    def names(cls, sw) -> list[str]:
        """The kernel links this switch is made of (without the VMs' links)."""
        return [sw.bridge, *(sw.uplink or ())]

    @classmethod
    def create_lines(cls, sw, physical: str | None) -> list[str]:
        """ip lines making the switch, before the VMs' links are put on it."""
        return []

    @classmethod
    def uplink_lines(cls, sw, physical: str | None) -> list[str]:
        """ip lines making the switch's uplink to the ``physical`` bridge, after the VMs' links."""
        return []

    @classmethod
    def vm_link_lines(cls, sw, link: str, netns: str) -> list[str]:
        """ip lines giving namespace ``netns`` an ``eth0`` on this switch (``link``: its end on the host)."""
        raise NotImplementedError

    @classmethod
    def tap_lines(cls, sw, tap: str, mac: str) -> list[str]:
        """ip lines making a QEMU guest's tap ``tap`` and putting it on this switch (``mac``: the guest NIC's)."""
        raise NotImplementedError

    @classmethod
    def nic_options(cls, sw) -> str:
        """What a QEMU guest's virtio-net device on this switch needs beyond its defaults (',csum=off')."""
        return ""

    @classmethod
    def head_lines(cls, sw, head: str) -> list[str]:
        """ip lines making the head's own link ``head`` on this switch (a switch that is no Linux bridge)."""
        raise NotImplementedError

    @classmethod
    def start(cls, sw, ports: list[str], netns: list[str], head: str | None) -> dict:
        """After the ip batch: what ip cannot do (``ports``: the host-side links on it, ``netns``: the namespaces
        whose eth0 is on it, ``head``: the head's link when it is on this switch). The facts the record keeps."""
        return {}

    @classmethod
    def shaping(cls, sw, tbf_line) -> list[str]:
        """tc lines shaping the switch's uplink (``tbf_line(dev)``: fabric's lines for one device)."""
        return [line for dev in sw.uplink or () for line in tbf_line(dev)]

    @classmethod
    def health(cls, sw) -> str | None:
        """What is wrong with the switch itself ('bridge vnb..s0 was deleted'), or None; cheap (a job's watch)."""
        return None

    @classmethod
    def describe(cls, sw, facts: dict) -> dict:
        """The record's fields for this switch beyond name, rate and delay."""
        return {"kind": cls.kind}

    @classmethod
    def remove(cls, sw, present: set[str]) -> list[str]:
        """Remove what ip does not, then the ip lines that delete the switch's links in ``present``."""
        return [f"link del {name}" for name in cls.names(sw) if name in present]

    @classmethod
    def leftovers(cls, sw, present: set[str]) -> list[str]:
        return [name for name in cls.names(sw) if name in present]

    @classmethod
    def orphans(cls, known_ids: set[str]) -> list[str]:
        """Remove what this kind made outside the kernel's links for topologies not in ``known_ids`` (an OVS
        bridge, a daemon nothing uses); phrases of what went."""
        return []

    @classmethod
    def released(cls) -> None:
        """After a topology's switches of this kind were removed: stop what only they needed."""
