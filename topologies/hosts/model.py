"""The hosts backend's one model: a hosts topology (real hosts with an address, a switch, slots and SSH settings).

Whatever it was read from, a hosts topology is validated once, by this module's pydantic models through
``topologies/model/validation.py``, and then checked across fields (one name and one address per host, on the
network, on a listed switch). Its problems are named as the user wrote them:

- a topology file (``backend: hosts``), ``from_file``: ``FILE:LINE: hosts[1].slots: what`` (field paths);
- a hostfile or an inventory, ``from_read`` of what its reader made (``Read``): ``FILE:LINE: host 'x': slots:
  what`` or ``FILE: host 'x': slots: what``, as a host's place in a list the user never wrote would mean nothing;
- a VM topology with ``backend: hosts`` (each VM on a host with an address), ``from_vms``.
"""

import ipaddress
import os
import re
from dataclasses import dataclass, field
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainValidator, PrivateAttr

from vnetbench.core.errors import SpecError, UsageError

from ..model import units, validation
from ..launch.sshlaunch import ssh_argv

DEFAULT_SWITCH = "default"
DEFAULT_NAME = "hosts"
MAX_SLOTS = 4096
HOST_NAME_RE = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,253})\Z")
SWITCH_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,62})\Z")
HOST_NAME = "a host name (letters, digits, '.', '-', '_')"


# ---- field checks ---------------------------------------------------------------------------

def is_host_name(value) -> bool:
    return isinstance(value, str) and bool(HOST_NAME_RE.match(value))


def _pattern(regex, what: str):
    def check(value):
        if not isinstance(value, str) or not regex.match(value):
            raise ValueError(f"{units.shown(value)} is not {what}")
        return value
    return check


def _whole(low: int, high: int):
    """A whole number in [low, high]; text of one too, as hostfiles and INI inventories give every value."""
    def check(value):
        if isinstance(value, str) and re.fullmatch(r"\s*[+-]?[0-9]{1,12}\s*", value):
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{units.shown(value)} is not a whole number")
        if not low <= value <= high:
            raise ValueError(f"{value} is out of range; allowed: {low} to {high}")
        return value
    return check


def _choice(options):
    def check(value):
        if value not in options:
            raise ValueError(f"expected one of {', '.join(map(str, options))}, got {units.shown(value)}")
        return value
    return check


def _network(value):
    try:
        return str(ipaddress.IPv4Network(value, strict=True))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{units.shown(value)} is not an IPv4 network such as 10.0.0.0/24 ({exc})") from None


def _ipv4(value):
    try:
        return str(ipaddress.IPv4Address(value))
    except (ValueError, TypeError):
        raise ValueError(f"{units.shown(value)} is not an IPv4 address") from None


def _absolute(value):
    if not isinstance(value, str) or not os.path.isabs(value):
        raise ValueError(f"{units.shown(value)} is not an absolute path")
    return value


def _text(value):
    if not isinstance(value, str) or len(value) > 500:
        raise ValueError("expected text of at most 500 characters")
    return value


def _exactly_hosts(value):
    if value != "hosts":
        raise ValueError(f"expected 'hosts', got {units.shown(value)}")
    return value


_switch_name = _pattern(SWITCH_RE, "a switch name (letters, digits, '.', '-', '_')")


def _switch(value):
    """A switch of ``switches``: ``{name: NAME}`` as in every topology, or NAME."""
    if isinstance(value, dict):
        if set(value) != {"name"}:
            raise ValueError(f"expected {{name: NAME}} or NAME, got a mapping of {', '.join(map(str, value))}")
        value = value["name"]
    return _switch_name(value)


HostName = Annotated[str, PlainValidator(_pattern(HOST_NAME_RE, HOST_NAME))]
SwitchName = Annotated[str, PlainValidator(_switch_name)]
Text = Annotated[str, PlainValidator(_text)]
TopologyName = Annotated[str, PlainValidator(lambda v: units.check_name(v, units.TOPOLOGY_NAME_RE, 32))]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Ssh(_Model):
    """How the launching machine reaches a host: ``ssh [-l user] [-p port] [-i identity] [options] host``."""

    user: Text | None = None
    port: Annotated[int, PlainValidator(_whole(1, 65535))] = 22
    identity: Text | None = None
    options: tuple[Text, ...] = ()

    def argv(self, connect_timeout: int | None = None) -> list[str]:
        """ssh's options (before the host), for mpirun and for host checks (sshlaunch.ssh_argv)."""
        return ssh_argv(self.user, self.port, self.identity, self.options, connect_timeout)

    def to_dict(self) -> dict:
        data = {"user": self.user, "port": self.port, "identity": self.identity, "options": list(self.options)}
        return {key: value for key, value in data.items() if value not in (None, [], 22)}


class Host(_Model):
    """A host: its name in records, the IPv4 address mpirun and SSH reach it at, its switch, its slots."""

    name: HostName
    address: Annotated[str, PlainValidator(_ipv4)]
    switch: SwitchName = DEFAULT_SWITCH
    slots: Annotated[int, PlainValidator(_whole(1, MAX_SLOTS))] = 1
    ssh: Annotated[Ssh, BeforeValidator(lambda value: {} if value is None else value)] = Ssh()

    def to_dict(self) -> dict:
        data = {"name": self.name, "address": self.address, "switch": self.switch, "slots": self.slots}
        if self.ssh.to_dict():
            data["ssh"] = self.ssh.to_dict()
        return data


class HostsTopology(_Model):
    """Real hosts as a topology. Once built (``from_file``, ``from_read``, ``from_vms``), ``subnet`` is the
    network MPI traffic stays on (given, or the /24 every address shares) and ``switches`` the names of the
    switches the hosts are on, in the hosts' order."""

    version: Annotated[int, PlainValidator(_choice((1,)))] = 1
    name: TopologyName = DEFAULT_NAME
    description: Text = ""
    backend: Annotated[str, PlainValidator(_exactly_hosts)]
    subnet: Annotated[str, PlainValidator(_network)] | None = None
    placement: Annotated[str, PlainValidator(_choice(units.PLACEMENTS))] = "block"
    switches: list[Annotated[str, PlainValidator(_switch)]] = []
    hosts: list[Host]
    venv: Annotated[str, PlainValidator(_absolute)] | None = None

    _source: str = PrivateAttr(default="<hosts>")
    _hosts_are_vms: bool = PrivateAttr(default=False)

    @property
    def source(self) -> str:
        return self._source

    @property
    def hosts_are_vms(self) -> bool:
        """The hosts are a VM topology's VMs (``from_vms``): each must get a rank, as every VM does."""
        return self._hosts_are_vms

    @property
    def slots(self) -> int:
        return sum(host.slots for host in self.hosts)

    def host(self, name: str) -> Host:
        return next(host for host in self.hosts if host.name == name)

    def to_dict(self) -> dict:
        """The topology file's content: ``from_file`` of it gives this topology again."""
        data = {"version": 1, "name": self.name, "backend": self.backend, "subnet": self.subnet,
                "placement": self.placement, "switches": [{"name": name} for name in self.switches],
                "hosts": [host.to_dict() for host in self.hosts]}
        if self.description:
            data["description"] = self.description
        if self.venv:
            data["venv"] = self.venv
        return data

    def place(self, ranks: int) -> list[int]:
        """The host index of each rank, as ``--map-by slot`` (block) or ``--map-by node`` place them."""
        if ranks > self.slots:
            per_host = ", ".join(f"{host.name} {host.slots}" for host in self.hosts)
            raise UsageError(f"--ranks: {ranks} ranks need more slots than the hosts have ({self.slots}: "
                             f"{per_host}); give hosts more slots (slots= in the hostfile, vnetbench_slots "
                             f"in the inventory)")
        if self.placement == "block":
            order = [i for i, host in enumerate(self.hosts) for _ in range(host.slots)]
            return order[:ranks]
        left, order = [host.slots for host in self.hosts], []
        while len(order) < ranks:
            for i in range(len(left)):
                if left[i] and len(order) < ranks:
                    order.append(i)
                    left[i] -= 1
        return order


# ---- building: the one validation ---------------------------------------------------------

@dataclass
class Read:
    """A hostfile or an inventory as its reader understood it, not yet validated: the topology's fields (name,
    subnet, placement, venv: as given) and each host's fields with where it was read (``FILE:LINE`` or ``FILE``)."""

    source: str
    fields: dict = field(default_factory=dict)
    hosts: list[tuple[str, dict]] = field(default_factory=list)


def from_file(data, source: str, lines=None) -> HostsTopology:
    """A topology file's mapping (``lines`` locate its fields) -> a HostsTopology; SpecError FILE:LINE: field: what."""
    if not isinstance(data, dict):
        raise SpecError(f"{source}: expected a mapping of topology fields")
    topology = validation.validated(HostsTopology, data, source, lines)
    problems = _cross_checks(topology)
    if problems:
        raise SpecError(validation.report(source, lines, problems))
    return _settled(topology, source)


def from_read(read: Read, hosts_are_vms: bool = False) -> HostsTopology:
    """What a reader made of a hostfile or inventory -> a HostsTopology; SpecError naming each host by its name."""
    hosts, errors = [], []
    for where, data in read.hosts:
        try:
            hosts.append(validation.validated(Host, data, f"{where}: host {data.get('name')!r}"))
        except SpecError as exc:
            errors.append(str(exc))
    if errors:
        raise SpecError("\n".join(errors))
    # the hosts are models already: pydantic takes them as they are, without validating them again
    topology = validation.validated(HostsTopology, {**read.fields, "backend": "hosts", "hosts": hosts}, read.source)
    problems = _cross_checks(topology)
    if problems:
        # a host's problem says which host it is: placed where that host was read
        raise SpecError("\n".join(f"{read.hosts[loc[1]][0]}: {what}" if loc[:1] == ("hosts",) and len(loc) > 1
                                  else validation.report(read.source, None, [(loc, what)]) for loc, what in problems))
    topology = _settled(topology, read.source)
    topology._hosts_are_vms = hosts_are_vms
    return topology


def from_vms(topology) -> HostsTopology:
    """A VM topology (the spec model) with ``backend: hosts``, each VM on the host of its name (or its ``host``),
    as a HostsTopology of its VMs."""
    source = getattr(topology, "source", "<spec>")
    addresses = {host.name: host.address for host in topology.hosts}
    read = Read(source, {"name": topology.name, "placement": topology.placement})
    if getattr(topology, "description", ""):
        read.fields["description"] = topology.description
    if topology.subnet:
        read.fields["subnet"] = str(topology.subnet)
    for vm in topology.vms:
        where = vm.host or vm.name
        if not addresses.get(where):
            raise SpecError(f"{source}: VM {vm.name!r}: no host {where!r} with an address; on the hosts backend "
                            f"each VM is a host: give hosts[].address")
        read.hosts.append((source, {"name": vm.name, "address": addresses[where], "switch": vm.switch,
                                    "slots": vm.vcpus}))
    return from_read(read, hosts_are_vms=True)


def _cross_checks(topology: HostsTopology) -> list[tuple[tuple, str]]:
    """What the fields say together: one name and one address per host, on the network, on a listed switch."""
    problems = []
    if not topology.hosts:
        problems.append((("hosts",), "expected a non-empty list"))
    switches = topology.switches
    subnet = ipaddress.IPv4Network(topology.subnet) if topology.subnet else None
    names, addresses = {}, {}
    for i, host in enumerate(topology.hosts):
        if host.name in names:
            problems.append((("hosts", i, "name"), f"host {host.name!r}: listed twice"))
        names.setdefault(host.name, i)
        if host.address in addresses:
            problems.append((("hosts", i, "address"), f"host {host.name!r}: has the same address {host.address} "
                                                      f"as host {topology.hosts[addresses[host.address]].name!r}"))
        addresses.setdefault(host.address, i)
        if subnet is not None and ipaddress.IPv4Address(host.address) not in subnet:
            problems.append((("hosts", i, "address"), f"host {host.name!r}: address {host.address} is outside the "
                             f"network {subnet} that MPI traffic is restricted to (vnetbench_network)"))
        if switches and host.switch not in switches:
            problems.append((("hosts", i, "switch"), f"host {host.name!r} is on {host.switch!r}, which is not among "
                                                     f"switches ({', '.join(switches)})"))
    return problems


def _settled(topology: HostsTopology, source: str) -> HostsTopology:
    """``topology`` with its network (the /24 its hosts share when none is given) and the switches in use."""
    subnet = topology.subnet
    if subnet is None:
        networks = {ipaddress.IPv4Network(f"{host.address}/24", strict=False) for host in topology.hosts}
        if len(networks) != 1:
            raise SpecError(f"{source}: the hosts are not on one /24 network "
                            f"({', '.join(sorted(map(str, networks)))}); say which network MPI traffic stays on: "
                            f"vnetbench_network in the inventory, or '# vnetbench: network=CIDR' in the hostfile")
        subnet = str(networks.pop())
    settled = topology.model_copy(update={"subnet": subnet,
                                          "switches": list(dict.fromkeys(host.switch for host in topology.hosts))})
    settled._source = source
    return settled
