"""Topology specs: the frozen, validated model shared by every backend of VM topologies, and its checks.

A topology names hosts, VMs (vCPUs, memory, NUMA policy, switch), switches (with an optional
uplink to the physical switch at a rate), how ranks are placed on VMs, and a subnet. Every
error names the file, the line and the field: ``FILE:LINE: vms[1].vcpus: what was expected``.
Here: the model (``model``), the checks that hold for any VM topology (``from_dict``), and a loader of
presets and YAML files through their backend's ``from_data`` (``load_topology``); what one backend
alone requires (sizes on this host, a local topology's lack of VMs) is in that backend's ``from_data``.
"""

import hashlib
import ipaddress
import json
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, PlainSerializer, PlainValidator, PrivateAttr, model_validator

from vnetbench.core.errors import SpecError, UsageError

from . import units
from vnetbench.topologies import base
from . import validation
from .validation import Lines, report, validated, where
from vnetbench.topologies.thishost.host import HostFacts

PLACEMENTS = units.PLACEMENTS
NUMA_POLICIES = ("packed", "spread")
MAX_VMS = 250
MAX_SWITCHES = 250
MAX_SPEC_BYTES = 1 << 20
# ASCII letters and digits only: isalnum() would let other scripts' letters through to the resolver
ADDRESS_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.:-]{0,252}\Z")


def count(low: int, high: int):
    def check(value):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected a whole number from {low} to {high}, got {units.shown(value)}")
        if not low <= value <= high:
            raise ValueError(f"{units.quoted(value, False)} is out of range; allowed: {low} to {high}")
        return value
    return check


def _numa(value):
    if isinstance(value, bool) or not isinstance(value, (int, str)) or isinstance(value, str) \
            and value not in NUMA_POLICIES:
        raise ValueError(f"expected a NUMA node number, 'packed' or 'spread', got {units.shown(value)}")
    if isinstance(value, int) and not 0 <= value < 1024:
        raise ValueError(f"node {units.quoted(value, False)} is out of range; allowed: 0 to 1023")
    return value


def _backend(value):
    if not isinstance(value, str) or value not in base.BACKENDS and value not in base.names():
        raise ValueError(f"expected one of {', '.join(base.names())}, got {units.shown(value)}")
    return value


def choice(options):
    def check(value):
        if value not in options:
            raise ValueError(f"expected one of {', '.join(map(str, options))}, got {units.shown(value)}")
        return value
    return check


def _subnet(value):
    if not isinstance(value, str):
        raise ValueError(f"expected an IPv4 network such as 10.213.7.0/24, got {units.shown(value)}")
    try:
        net = ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        raise ValueError(f"{units.quoted(value)} is not an IPv4 network such as 10.213.7.0/24 "
                         f"({units.quoted(str(exc), False, 60)})") from None
    if not 8 <= net.prefixlen <= 29:
        raise ValueError(f"/{net.prefixlen} is out of range; allowed: /8 to /29")
    return net


def _address(value):
    # the hosts backend reaches a host by this; it must never be more than a name or an address
    if not isinstance(value, str) or not ADDRESS_RE.match(value):
        raise ValueError(f"expected a host name or IP address, got {units.shown(value)}")
    return value


def short_text(value):
    if not isinstance(value, str) or len(value) > 500:
        raise ValueError("expected text of at most 500 characters")
    return value


Name = Annotated[str, PlainValidator(units.check_name)]
TopologyName = Annotated[str, PlainValidator(lambda v: units.check_name(v, units.TOPOLOGY_NAME_RE, 32))]
Size = Annotated[int, PlainValidator(units.parse_size), PlainSerializer(units.format_size)]
Rate = Annotated[int, PlainValidator(units.parse_rate), PlainSerializer(units.format_rate)]
Delay = Annotated[int, PlainValidator(units.parse_delay), PlainSerializer(units.format_delay)]
Subnet = Annotated[ipaddress.IPv4Network, PlainValidator(_subnet), PlainSerializer(str)]


class Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Uplink(Spec):
    """A switch's link to the physical switch: shaped to ``rate`` (bits/s) both ways; ``delay``
    (microseconds) is added in each direction by tc netem (tested for real in the guest tier,
    tests/guest); a kernel without netem refuses the spec."""

    rate: Rate
    delay: Delay | None = None


def _kind(value):
    from .. import switches

    if value not in switches.names():
        raise ValueError(f"expected one of {', '.join(switches.names())}, got {units.shown(value)}")
    return value


class Switch(Spec):
    """A virtual switch: its ``kind`` (switches/: bridge, ovs, macvlan) and, for Open vSwitch, its ``datapath``
    (auto: the kernel's where the openvswitch module is loaded, else the userspace one, netdev)."""

    name: Name
    kind: Annotated[str, PlainValidator(_kind)] = "bridge"
    datapath: Literal["auto", "system", "netdev"] | None = None
    uplink: Uplink | None = None

    @model_validator(mode="after")
    def _datapath_of_its_kind(self):
        # a kind whose driver has datapaths (Open vSwitch's) takes one, its first (auto) by default; others none
        from .. import switches

        default = switches.driver(self.kind).datapath_default
        if self.datapath is not None and default is None:
            having = [name for name in switches.names() if switches.driver(name).datapath_default]
            raise ValueError(f"datapath: only for kind: {', '.join(having)} (this switch is kind: {self.kind})")
        if self.datapath is None and default is not None:
            object.__setattr__(self, "datapath", default)
        return self


class VM(Spec):
    name: Name
    vcpus: Annotated[int, PlainValidator(count(1, 1024))]
    memory: Size
    numa: Annotated[int | str, PlainValidator(_numa)] = "packed"
    memory_policy: Literal["local", "remote", "interleave"] | None = None
    switch: Name
    host: Name | None = None


class Host(Spec):
    name: Name
    address: Annotated[str, PlainValidator(_address)] | None = None
    cpus: Annotated[int, PlainValidator(count(1, 65536))] | None = None
    memory: Size | None = None


class ScaleFrom(Spec):
    """The host a spec's sizes were written for; they are scaled to the host they run on."""

    cpus: Annotated[int, PlainValidator(count(1, 65536))]
    memory: Size


class Topology(Spec):
    """A validated topology. Sizes are those actually used on this host (after ``scale_from``)."""

    version: Annotated[int, PlainValidator(choice((1,)))] = 1
    name: TopologyName
    description: Annotated[str, PlainValidator(short_text)] = ""
    backend: Annotated[str, PlainValidator(_backend)]
    hosts: list[Host] = []
    switches: list[Switch] = []
    vms: list[VM] = []
    placement: Annotated[str, PlainValidator(choice(PLACEMENTS))] = "block"
    subnet: Subnet | None = None
    scale_from: ScaleFrom | None = None

    _source: str = PrivateAttr(default="<spec>")
    _lines: dict = PrivateAttr(default_factory=dict)
    _scaled: dict = PrivateAttr(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _default_backend(cls, data):
        if isinstance(data, dict) and "backend" not in data:
            data = {**data, "backend": base.default_backend(data)}
        return data

    @property
    def id(self) -> str:
        """Four hex digits from the name: what every object of this topology is prefixed with."""
        return hashlib.sha256(self.name.encode()).hexdigest()[:4]

    @property
    def source(self) -> str:
        return self._source

    @property
    def scaled(self) -> dict:
        """{'from': {cpus, memory}, 'to': {cpus, memory}, 'vms': {name: [vcpus, memory] asked}} or {}."""
        return self._scaled

    def switch(self, name: str) -> Switch:
        return next(sw for sw in self.switches if sw.name == name)

    def to_dict(self) -> dict:
        """The spec as used (sizes already scaled): loading it again gives the same topology."""
        data = self.model_dump(mode="json", exclude_none=True, exclude={"scale_from"})
        for sw in data.get("switches", []):
            if sw.get("kind") == "bridge":  # the default, left out: a spec from before kinds hashes as it did
                del sw["kind"]
        for key in ("hosts", "switches", "vms"):
            if not data[key]:
                del data[key]
        if not data["description"]:
            del data["description"]
        return data

    def spec_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:16]

    def locate(self, *loc) -> str:
        """'FILE:LINE: field.path' for an error a backend finds later (e.g. no netem for a delay)."""
        line, part = None, tuple(loc)
        while line is None and part:
            line, part = self._lines.get(part), part[:-1]
        return where(self._source, line, loc)


# ---- loading ------------------------------------------------------------------------------

def model(data, source: str = "<spec>", lines=None) -> Topology:
    """``data`` (as YAML gives it) as the model alone: SpecError listing every field that does not validate."""
    lines = lines or Lines(None)
    if not isinstance(data, dict):
        raise SpecError(f"{where(source, lines.find(()), ())}: expected a mapping of topology fields "
                        f"(name, vms, switches, ...), got {units.shown(data)}")
    topology = validated(Topology, data, source, lines)
    topology._source, topology._lines = source, lines.table()
    return topology


def from_dict(data, source: str = "<spec>", lines=None) -> Topology:
    """``data`` as a VM topology: the model and the checks that hold for any VM topology (a backend's
    ``from_data`` adds its own); SpecError listing every problem, each located."""
    topology = model(data, source, lines)
    problems = check_references(topology) + check_vms(topology)
    if problems:
        raise SpecError(report(source, lines or Lines(None), problems))
    return topology


def load_topology(ref: str, host: HostFacts | None = None, what: str = "--topology"):
    """A preset name or a topology YAML file -> the topology its backend's ``from_data`` makes of it.

    ``host``: the host a backend that runs VMs on this host sizes them for (a fake one, in tests); ``what``
    names where ``ref`` was typed. Hostfiles, inventories and ``BACKEND:REF`` refs: ``topologies.load``.
    """
    from . import presets

    if ref in presets.PRESETS:
        return _through_backend(presets.PRESETS[ref], f"preset {ref}", None, host)
    path = Path(ref)
    if not path.is_file():
        if "/" in ref or ref.endswith((".yaml", ".yml")):
            raise UsageError(f"{what}: no such file: {ref}")
        raise UsageError(f"{what}: unknown topology {ref!r}; choose a preset ({', '.join(presets.PRESETS)}) "
                         f"or a YAML file")
    return load_file(path, host=host)


def load_file(path: Path, host: HostFacts | None = None):
    """A topology YAML file -> the topology its backend's ``from_data`` makes of it (``host``: as load_topology)."""
    data, lines = validation.read(path, str(path), "a topology spec", MAX_SPEC_BYTES, "a topology file")
    return _through_backend(data, str(path), lines, host)


def _through_backend(data, source: str, lines, host: HostFacts | None):
    chosen = data.get("backend", base.default_backend(data)) if isinstance(data, dict) else None
    if not isinstance(chosen, str) or chosen not in base.names():
        return from_dict(data, source, lines)  # the model's own error: not a mapping, an unknown backend
    return base.backend(chosen).from_data(data, source, lines, **({"host": host} if host is not None else {}))


def check_references(t: Topology) -> list[tuple[tuple, str]]:
    """Problems that no single field shows: names given twice, references to switches and hosts."""
    problems = []
    for kind in ("hosts", "switches", "vms"):
        seen = {}
        for i, item in enumerate(getattr(t, kind)):
            if item.name in seen:
                problems.append(((kind, i, "name"), f"{item.name!r} is already the name of {kind}[{seen[item.name]}]"))
            seen.setdefault(item.name, i)
    switches = [sw.name for sw in t.switches]
    hosts = [h.name for h in t.hosts]
    for i, vm in enumerate(t.vms):
        if vm.switch not in switches:
            have = ", ".join(switches) or "none are declared"
            problems.append((("vms", i, "switch"), f"no switch named {vm.switch!r}; switches: {have}"))
        if vm.host is not None and vm.host not in hosts:
            have = ", ".join(hosts) or "none are declared"
            problems.append((("vms", i, "host"), f"no host named {vm.host!r}; hosts: {have}"))
    return problems


def check_vms(t: Topology) -> list[tuple[tuple, str]]:
    """What any VM topology needs: VMs (not too many), uplinks between switches that have VMs, a subnet with
    room for every VM and the head."""
    problems = []
    if not t.vms:
        problems.append((("vms",), f"the {t.backend} backend needs at least one VM"))
    if len(t.vms) > MAX_VMS:
        problems.append((("vms",), f"{len(t.vms)} VMs; allowed: at most {MAX_VMS}"))
    if len(t.switches) > MAX_SWITCHES:
        problems.append((("switches",), f"{len(t.switches)} switches; allowed: at most {MAX_SWITCHES}"))
    used = [sw for sw in t.switches if any(vm.switch == sw.name for vm in t.vms)]
    if len(used) > 1:
        for i, sw in enumerate(t.switches):
            if sw in used and sw.uplink is None:
                problems.append((("switches", i), f"switch {sw.name!r} has VMs but no uplink: VMs on "
                                                  f"different switches reach each other only through "
                                                  f"uplinks to the physical switch"))
    if t.subnet is not None and t.subnet.num_addresses - 2 < len(t.vms) + 1:
        problems.append((("subnet",), f"{t.subnet} has {t.subnet.num_addresses - 2} addresses; "
                                      f"{len(t.vms) + 1} are needed (each VM and the head)"))
    return problems
