"""The hosts backend's topology file, validated by the same spec machinery as every other topology.

A hosts topology (``backend: hosts``: hosts with an address, a switch, slots and SSH settings) is
validated field by field by pydantic models and checked across fields here, and every problem is
reported as the other specs' are: ``FILE:LINE: hosts[1].address: what was expected``. Hostfiles
and inventories are read by ``inventory`` into the same shape and validated here too.
"""

import ipaddress
import os
import re
from typing import Annotated

from pydantic import PlainValidator

from vnetbench.errors import SpecError

from . import units
from .files import read_yaml
from .hosts import DEFAULT_NAME, DEFAULT_SWITCH, HOST_NAME_RE, MAX_SLOTS, SWITCH_RE, HostEntry, HostsTopology, \
    Ssh, derived_subnet
from .spec import MAX_SPEC_BYTES, Lines, Spec, TopologyName, choice, count, report, short_text, validated


def _pattern(regex, what: str):
    def check(value):
        if not isinstance(value, str) or not regex.match(value):
            raise ValueError(f"{units.shown(value)} is not {what}")
        return value
    return check


def _exactly(expected: str):
    def check(value):
        if value != expected:
            raise ValueError(f"expected {expected!r}, got {units.shown(value)}")
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


HostName = Annotated[str, PlainValidator(_pattern(HOST_NAME_RE, "a host name (letters, digits, '.', '-', '_')"))]
SwitchName = Annotated[str, PlainValidator(_pattern(SWITCH_RE, "a switch name (letters, digits, '.', '-', '_')"))]
Text = Annotated[str, PlainValidator(short_text)]


class SshSpec(Spec):
    user: Text | None = None
    port: Annotated[int, PlainValidator(count(1, 65535))] = 22
    identity: Text | None = None
    options: list[Text] = []


class HostSpec(Spec):
    name: HostName
    address: Annotated[str, PlainValidator(_ipv4)]
    switch: SwitchName = DEFAULT_SWITCH
    slots: Annotated[int, PlainValidator(count(1, MAX_SLOTS))] = 1
    ssh: SshSpec | None = None


class SwitchSpec(Spec):
    name: SwitchName


class HostsSpec(Spec):
    version: Annotated[int, PlainValidator(choice((1,)))] = 1
    name: TopologyName = DEFAULT_NAME
    description: Text = ""
    backend: Annotated[str, PlainValidator(_exactly("hosts"))]
    subnet: Annotated[str, PlainValidator(_network)] | None = None
    placement: Annotated[str, PlainValidator(choice(units.PLACEMENTS))] = "block"
    switches: list[SwitchSpec | SwitchName] = []
    hosts: list[HostSpec]
    venv: Annotated[str, PlainValidator(_absolute)] | None = None


def _cross_checks(spec: HostsSpec) -> list[tuple[tuple, str]]:
    """What the fields say together: one name and one address per host, on the network, on a listed switch."""
    problems = []
    if not spec.hosts:
        problems.append((("hosts",), "expected a non-empty list"))
    switches = [sw.name if isinstance(sw, SwitchSpec) else sw for sw in spec.switches]
    subnet = ipaddress.IPv4Network(spec.subnet) if spec.subnet else None
    names, addresses = {}, {}
    for i, host in enumerate(spec.hosts):
        if host.name in names:
            problems.append((("hosts", i, "name"), f"host {host.name!r}: listed twice"))
        names.setdefault(host.name, i)
        if host.address in addresses:
            problems.append((("hosts", i, "address"), f"host {host.name!r}: has the same address {host.address} "
                                                      f"as host {spec.hosts[addresses[host.address]].name!r}"))
        addresses.setdefault(host.address, i)
        if subnet is not None and ipaddress.IPv4Address(host.address) not in subnet:
            problems.append((("hosts", i, "address"), f"host {host.name!r}: address {host.address} is outside the "
                             f"network {subnet} that MPI traffic is restricted to (vnetbench_network)"))
        if switches and host.switch not in switches:
            problems.append((("hosts", i, "switch"), f"host {host.name!r} is on {host.switch!r}, which is not among "
                                                     f"switches ({', '.join(switches)})"))
    return problems


def from_dict(data, source: str = "<hosts>", lines=None) -> HostsTopology:
    """The topology file's mapping -> a validated HostsTopology (SpecError: FILE:LINE: field: what)."""
    if not isinstance(data, dict):
        raise SpecError(f"{source}: expected a mapping of topology fields")
    spec = validated(HostsSpec, data, source, lines)
    problems = _cross_checks(spec)
    if problems:
        raise SpecError(report(source, lines, problems))
    hosts = tuple(HostEntry(name=h.name, address=h.address, switch=h.switch, slots=h.slots,
                            ssh=Ssh(**{**h.ssh.model_dump(), "options": tuple(h.ssh.options)}) if h.ssh else Ssh())
                  for h in spec.hosts)
    return HostsTopology(name=spec.name, hosts=hosts, subnet=spec.subnet or derived_subnet(hosts, source),
                         placement=spec.placement, venv=spec.venv, source=source)


def load_text(text: str, source: str) -> HostsTopology:
    """A hosts topology file's text (already read within MAX_SPEC_BYTES) -> a validated HostsTopology."""
    data, node = read_yaml(text[:MAX_SPEC_BYTES + 1], source, "a topology file", aliases=False, tree=True)
    lines = Lines(node)
    if lines.duplicates:
        loc, line = lines.duplicates[0]
        raise SpecError(f"{source}:{line}: {'.'.join(map(str, loc))}: given twice")
    return from_dict(data, source, lines)


def validate(topology: HostsTopology) -> HostsTopology:
    """``topology`` (read from a hostfile or an inventory) if its file form validates; SpecError otherwise,
    naming hosts by name: their place in a list the user never wrote would mean nothing."""
    try:
        from_dict(topology.to_dict(), topology.source)
    except SpecError as exc:
        raise SpecError("\n".join(_by_name(line, topology) for line in str(exc).splitlines())) from None
    return topology


def _by_name(line: str, topology: HostsTopology) -> str:
    found = re.match(r"^(.*?): hosts\[(\d+)\](?:\.([\w.\[\]]+))?: (.*)$", line)
    if not found or int(found[2]) >= len(topology.hosts):
        return line
    source, index, field, what = found.groups()
    if what.startswith("host '"):
        return f"{source}: {what}"
    return f"{source}: host {topology.hosts[int(index)].name!r}: {f'{field}: ' if field else ''}{what}"
