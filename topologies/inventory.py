"""Hosts for the hosts backend, read from an Open MPI hostfile, an Ansible inventory (YAML or INI) or a hosts topology file.

- ``load_hosts(path)`` (or ``inventory=``/``hostfile=``) -> a validated ``HostsTopology``; every
  error is a SpecError naming the file and the host or field;
- a topology file (``backend: hosts``) is what ``HostsTopology.to_dict`` and the Ansible role
  vnetbench_hostfile write, read by ``hosts.from_dict``;
- ``python -m vnetbench.topologies.inventory FILE`` prints FILE as a topology, or why it is not one.

Inventories are read without Ansible. From each host's variables (host over group, deeper
groups over shallower, as Ansible merges them) vnetbench takes: its address (``vnetbench_address``,
else ``ansible_host``, else its name, resolved), its switch (``vnetbench_switch``, or membership
of a group ``switch_<name>``), ``vnetbench_slots`` (default 1), how to reach it (``ansible_user``,
``ansible_port``, ``ansible_ssh_private_key_file``, ``ansible_ssh_common_args``,
``ansible_ssh_extra_args``) and, the same on every host, ``vnetbench_network`` (the network MPI
traffic stays on; default: the /24 all addresses share), ``vnetbench_venv``,
``vnetbench_placement`` and ``vnetbench_topology_name``. The hosts are those of the group
``compute`` (when there is one, or the group asked for), else every host.

A hostfile is Open MPI's (``HOST [slots=N] [max_slots=N]``); vnetbench reads what Open MPI
ignores, comments: ``# vnetbench: name=NAME network=CIDR placement=block venv=PATH`` on a line
of its own, and ``# vnetbench: switch=NAME name=LABEL`` after a host (LABEL names the host in
records, where the hostfile gives an address).
"""

import ipaddress
import json
import os
import re
import shlex
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path

from vnetbench.errors import SpecError, UsageError

from .files import read_text, read_yaml
from .hosts import (DEFAULT_NAME, DEFAULT_SWITCH, HostEntry, HostsTopology, Ssh, derived_subnet, host_name,
                    no_unknown, switch_name, topology_name, validate, whole_number)

COMPUTE_GROUP = "compute"
SWITCH_GROUP_PREFIX = "switch_"
MAX_FILE_BYTES = 1 << 20
# a DNS name (labels of letters, digits, '-' and '_', joined by dots) or an IPv4 address
ADDRESS_RE = re.compile(r"^(?=.{1,253}\Z)[A-Za-z0-9_](?:[A-Za-z0-9_-]*)(?:\.[A-Za-z0-9_-]+)*\.?\Z")
# variables that must be the same on every host: variable -> topology field
SHARED_VARS = {"vnetbench_network": "subnet", "vnetbench_venv": "venv", "vnetbench_placement": "placement",
               "vnetbench_topology_name": "name"}


def load_hosts(path: str | os.PathLike | None = None, *, inventory=None, hostfile=None, group: str | None = None,
               all_hosts: bool = False) -> HostsTopology:
    """A HostsTopology from a hostfile, an Ansible inventory or a topology file (sniffed when only ``path``).

    ``group``: the inventory group to take (default: ``compute`` if there is one, else every host).
    ``all_hosts``: the machines to check rather than a topology to run on: every host by default
    (the head node too), and hosts need no switch.
    """
    given = [p for p in (path, inventory, hostfile) if p is not None]
    if len(given) != 1:
        raise UsageError("give one of --inventory FILE or --hostfile FILE")
    path = Path(given[0])
    if inventory is not None and path.is_dir():  # an inventory directory: Ansible's form, Ansible reads it
        found = _by_ansible(path)
        if found is None:
            raise SpecError(f"--inventory: {path} is a directory; reading inventory directories needs "
                            f"ansible-inventory (pip install ansible-core), else give one file")
        return _from_inventory(found, str(path), path, group, all_hosts)
    text = _read(path, "--inventory" if inventory is not None else "--hostfile" if hostfile is not None else None)
    if hostfile is not None:
        return _from_hostfile(text, str(path))
    data = _yaml_or_none(text, path) if path.suffix.lower() not in (".ini", ".cfg") else None
    if isinstance(data, dict) and "backend" in data:
        if inventory is not None:
            raise SpecError(f"{path}: a topology file, not an Ansible inventory; give it as --topology")
        from .hostspec import load_text

        return load_text(text, str(path))
    if isinstance(data, dict):
        return _from_inventory(_by_ansible(path) or _yaml_inventory(data, str(path)), str(path), path.parent,
                               group, all_hosts)
    if inventory is not None or path.suffix.lower() in (".ini", ".cfg") or _looks_ini(text):
        if path.suffix.lower() in (".yml", ".yaml"):
            raise SpecError(f"{path}: expected a YAML inventory (a mapping such as all: {{children: ...}})")
        return _from_inventory(_by_ansible(path) or _ini_inventory(text, str(path)), str(path), path.parent,
                               group, all_hosts)
    return _from_hostfile(text, str(path))


def is_hosts_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is for the hosts backend (a hostfile, an inventory, a hosts topology file)."""
    path = Path(path)
    try:
        text = _read(path, None)
    except SpecError:
        return False
    try:
        data = read_yaml(text, str(path), "a hostfile or inventory")
    except SpecError:
        data = None
    if path.suffix.lower() in (".yml", ".yaml") and not isinstance(data, dict):
        return False
    if isinstance(data, dict):
        return data.get("backend") == "hosts" or "backend" not in data and all(
            value is None or isinstance(value, dict) and set(value) <= {"hosts", "vars", "children"}
            for value in data.values())
    return _looks_ini(text) or bool(_hostfile_lines(text))


# ---- hostfiles ------------------------------------------------------------------------------

def _hostfile_lines(text: str) -> list[tuple[int, list[str], str]]:
    """(line number, tokens, comment) of each host line."""
    lines = []
    for number, raw in enumerate(text.splitlines(), start=1):
        body, _, comment = raw.partition("#")
        if body.strip():
            lines.append((number, body.split(), comment.strip()))
    return lines


def _directive(comment: str, source: str, number: int, allowed: set[str]) -> dict:
    if not comment.startswith("vnetbench:"):
        return {}
    found = {}
    for token in comment[len("vnetbench:"):].split():
        key, sep, value = token.partition("=")
        if not sep or key not in allowed:
            raise SpecError(f"{source}:{number}: {token!r} is not a vnetbench setting here; "
                            f"allowed: {', '.join(f'{k}=...' for k in sorted(allowed))}")
        found[key] = value
    return found


def _from_hostfile(text: str, source: str) -> HostsTopology:
    settings, entries = {}, []
    for number, raw in enumerate(text.splitlines(), start=1):
        if raw.strip().startswith("#"):
            settings.update(_directive(raw.strip()[1:].strip(), source, number, {"name", "network", "placement",
                                                                                  "venv"}))
    seen = {}
    for number, tokens, comment in _hostfile_lines(text):
        name = tokens[0]
        where = f"{source}:{number}"
        if "@" in name:
            raise SpecError(f"{where}: {name!r}: user@host is not read by vnetbench; use an Ansible inventory "
                            f"with ansible_user")
        host_name(name, where, "host")
        if name in seen:
            raise SpecError(f"{where}: host {name!r} is listed twice (first on line {seen[name]})")
        seen[name] = number
        slots = 1
        for token in tokens[1:]:
            key, sep, value = token.partition("=")
            if key == "slots" and sep:
                slots = whole_number(value, where, f"host {name!r}: slots")
            elif key in ("max_slots", "max-slots") and sep:
                whole_number(value, where, f"host {name!r}: {key}")
            else:
                raise SpecError(f"{where}: host {name!r}: {token!r} is not a hostfile option; allowed: slots=N, "
                                f"max_slots=N")
        per_host = _directive(comment, source, number, {"switch", "name"})
        label = host_name(per_host.get("name", name), where, "name")
        entries.append(HostEntry(name=label, address=_resolve(label, name, where), slots=slots,
                                 switch=switch_name(per_host.get("switch", DEFAULT_SWITCH), where, label)))
    if not entries:
        raise SpecError(f"{source}: no hosts (a hostfile lists one host per line: HOST [slots=N])")
    return validate(HostsTopology(
        name=topology_name(settings.get("name", DEFAULT_NAME), source), hosts=tuple(entries),
        subnet=settings.get("network") or derived_subnet(entries, source),
        placement=settings.get("placement", "block"), venv=settings.get("venv"), source=source))


# ---- Ansible inventories --------------------------------------------------------------------

@dataclass
class _Group:
    hosts: list[str] = field(default_factory=list)
    vars: dict = field(default_factory=dict)
    children: list[str] = field(default_factory=list)


@dataclass
class _Inventory:
    groups: dict[str, _Group] = field(default_factory=lambda: {"all": _Group()})
    host_vars: dict[str, dict] = field(default_factory=dict)
    merged: bool = False  # host_vars already hold group_vars/ and host_vars/ (ansible-inventory did it)

    def group(self, name: str, parent: str | None = None) -> _Group:
        found = self.groups.setdefault(name, _Group())
        if parent is not None and name not in self.groups[parent].children and name != parent:
            self.groups[parent].children.append(name)
        return found

    def add_host(self, name: str, group: str, variables: dict | None) -> None:
        self.host_vars.setdefault(name, {}).update(variables or {})
        if name not in self.groups[group].hosts:
            self.groups[group].hosts.append(name)


def _yaml_inventory(data: dict, source: str) -> _Inventory:
    inv = _Inventory()

    def walk(name, body, parent):
        if not isinstance(name, str) or not name:
            raise SpecError(f"{source}: group name {name!r} is not text")
        group = inv.group(name, parent)
        if body is None:
            return
        if not isinstance(body, dict):
            raise SpecError(f"{source}: group {name!r}: expected a mapping with hosts, vars or children, "
                            f"got {type(body).__name__}")
        no_unknown(body, {"hosts", "vars", "children"}, source, f"group {name!r}")
        hosts = body.get("hosts") or {}
        if not isinstance(hosts, dict):
            raise SpecError(f"{source}: group {name!r}: hosts: expected a mapping of host names "
                            f"(host: or host: {{ansible_host: ...}}), got {type(hosts).__name__}")
        for host, variables in hosts.items():
            host_name(host, source, f"group {name!r}: host")
            if variables is not None and not isinstance(variables, dict):
                raise SpecError(f"{source}: host {host!r}: expected a mapping of variables, got {variables!r}")
            inv.add_host(host, name, variables)
        variables = body.get("vars") or {}
        if not isinstance(variables, dict):
            raise SpecError(f"{source}: group {name!r}: vars: expected a mapping")
        group.vars.update(variables)
        children = body.get("children") or {}
        if not isinstance(children, dict):
            raise SpecError(f"{source}: group {name!r}: children: expected a mapping of group names")
        for child, child_body in children.items():
            walk(child, child_body, name)

    for name, body in data.items():
        walk(name, body, None if name == "all" else "all")
    return inv


def _by_ansible(path: Path) -> "_Inventory | None":
    """The inventory as ansible-inventory lists it (topologies/ansible_inventory.py), or None."""
    from .ansible_inventory import read

    found = read(path)
    if found is None:
        return None
    groups, host_vars = found
    inv = _Inventory(groups={name: _Group(hosts=body["hosts"], children=body["children"])
                             for name, body in groups.items()}, host_vars=host_vars, merged=True)
    inv.groups.setdefault("all", _Group())
    for body in list(groups.values()):  # Ansible leaves empty groups (ungrouped) out of the listing
        for child in body["children"]:
            inv.groups.setdefault(child, _Group())
    return inv


def _looks_ini(text: str) -> bool:
    return any(re.match(r"^\s*\[[^\]]+\]\s*$", line) for line in text.splitlines())


def _ini_inventory(text: str, source: str) -> _Inventory:
    inv, section, kind = _Inventory(), "ungrouped", "hosts"
    defined, mentioned = {"all", "ungrouped"}, []
    inv.group("ungrouped", "all")
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        where = f"{source}:{number}"
        if not line or line[0] in "#;":
            continue
        match = re.match(r"^\[([^\]:]+)(?::(vars|children))?\]$", line)
        if line.startswith("["):
            if not match:
                raise SpecError(f"{where}: {line!r} is not a section header ([group], [group:vars] or "
                                f"[group:children])")
            section, kind = match.group(1), match.group(2) or "hosts"
            if kind == "vars":
                inv.groups.setdefault(section, _Group())
                mentioned.append((section, where))
            else:
                defined.add(section)
                inv.group(section, None if section == "all" else "all")
            continue
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError as exc:
            raise SpecError(f"{where}: cannot read {line!r}: {exc}") from None
        if kind == "vars":
            key, sep, value = line.partition("=")
            if not sep:
                raise SpecError(f"{where}: expected key=value in [{section}:vars], got {line!r}")
            inv.groups[section].vars[key.strip()] = " ".join(shlex.split(value, comments=True))
        elif kind == "children":
            inv.group(tokens[0], section)
            mentioned.append((tokens[0], where))
        else:
            hosts = [host_name(host, where, "host") for host in _expand(tokens[0], where)]
            variables = {}
            for token in tokens[1:]:
                key, sep, value = token.partition("=")
                if not sep:
                    raise SpecError(f"{where}: host {tokens[0]!r}: expected key=value, got {token!r}")
                variables[key] = value
            for host in hosts:
                inv.add_host(host, section, variables)
                if section != "ungrouped":
                    inv.groups["ungrouped"].hosts = [h for h in inv.groups["ungrouped"].hosts if h != host]
    for name, where in mentioned:
        if name not in defined:
            raise SpecError(f"{where}: group {name!r} is not defined (no [{name}] or [{name}:children] section)")
    return inv


def _expand(pattern: str, where: str) -> list[str]:
    match = re.match(r"^(.*)\[([0-9a-z]+):([0-9a-z]+)\](.*)$", pattern)
    if not match:
        return [pattern]
    head, low, high, tail = match.groups()
    if not (low.isdigit() and high.isdigit()) or int(low) > int(high):
        raise SpecError(f"{where}: host range {pattern!r}: expected [LOW:HIGH] with whole numbers, LOW <= HIGH")
    width = len(low) if low.startswith("0") else 0
    return [f"{head}{n:0{width}d}{tail}" for n in range(int(low), int(high) + 1)]


def _ancestry(inv: _Inventory) -> dict[str, list[str]]:
    """host -> the groups it is in, directly or through children, shallowest first (as Ansible merges)."""
    depth, parents = {"all": 0}, {}
    for name, group in inv.groups.items():
        for child in group.children:
            parents.setdefault(child, []).append(name)
    pending = ["all"]
    while pending:
        name = pending.pop()
        for child in inv.groups[name].children:
            if depth.get(child, -1) < depth[name] + 1 and depth[name] < len(inv.groups):
                depth[child] = depth[name] + 1
                pending.append(child)
    result = {}
    for host in inv.host_vars:
        found, todo = set(), [g for g, group in inv.groups.items() if host in group.hosts]
        while todo:
            name = todo.pop()
            if name not in found:
                found.add(name)
                todo += parents.get(name, [])
        found.add("all")
        result[host] = sorted(found, key=lambda g: (depth.get(g, 1), g))
    return result


def _members(inv: _Inventory, name: str) -> list[str]:
    hosts, todo, seen = [], [name], set()
    while todo:
        group = todo.pop(0)
        if group in seen:
            continue
        seen.add(group)
        hosts += [h for h in inv.groups[group].hosts if h not in hosts]
        todo += inv.groups[group].children
    return hosts


def _from_inventory(inv: _Inventory, source: str, base: Path, group: str | None,
                    all_hosts: bool = False) -> HostsTopology:
    _load_var_dirs(inv, base, source)
    if group is not None and group not in inv.groups:
        raise SpecError(f"{source}: no group {group!r}; groups: {', '.join(sorted(inv.groups))}")
    chosen = group or (COMPUTE_GROUP if COMPUTE_GROUP in inv.groups and not all_hosts else "all")
    names = _members(inv, chosen) if chosen != "all" else list(inv.host_vars)
    if not names:
        raise SpecError(f"{source}: group {chosen!r} has no hosts")
    ancestry = _ancestry(inv)
    entries, shared, switch_given = [], {}, {}
    for host in names:
        variables = {}
        for name in ancestry[host]:
            variables.update(inv.groups[name].vars)
        variables.update(inv.host_vars[host])
        entries.append(_host_entry(host, variables, ancestry[host], source, switch_given))
        for var in SHARED_VARS:
            value = variables.get(var)
            _no_template(host, var, value, source)
            if var in shared and shared[var][1] != value:
                raise SpecError(f"{source}: host {host!r}: {var} is {value!r}, but {shared[var][0]!r} has "
                                f"{shared[var][1]!r}; it must be the same on every host")
            shared.setdefault(var, (host, value))
    if any(switch_given.values()) and not all_hosts:
        missing = [h for h, given in switch_given.items() if not given]
        if missing:
            raise SpecError(f"{source}: host {missing[0]!r}: no switch: add it to a group switch_<name> or set "
                            f"vnetbench_switch, as the other hosts have")
    value = {field_: shared[var][1] for var, field_ in SHARED_VARS.items() if shared[var][1] is not None}
    return validate(HostsTopology(
        name=topology_name(value.get("name", DEFAULT_NAME), source), hosts=tuple(entries),
        subnet=str(value.get("subnet") or derived_subnet(entries, source)),
        placement=value.get("placement", "block"), venv=value.get("venv"), source=source))


def _load_var_dirs(inv: _Inventory, base: Path, source: str) -> None:
    """group_vars/ and host_vars/ beside the inventory, as Ansible reads them (files NAME.yml, .yaml, NAME)."""
    if inv.merged:
        return
    for kind, targets in (("group_vars", inv.groups), ("host_vars", inv.host_vars)):
        for name in list(targets):
            for suffix in (".yml", ".yaml", ""):
                path = base / kind / f"{name}{suffix}"
                if path.is_file():
                    data = _yaml_or_none(_read(path, None), path)
                    if not isinstance(data, dict):
                        raise SpecError(f"{path}: expected a mapping of variables")
                    (targets[name].vars if kind == "group_vars" else targets[name]).update(data)


def _host_entry(host: str, variables: dict, groups: list[str], source: str, switch_given: dict) -> HostEntry:
    for var in ("vnetbench_address", "ansible_host", "vnetbench_switch", "vnetbench_slots", "ansible_user",
                "ansible_port", "ansible_ssh_private_key_file", "ansible_ssh_common_args", "ansible_ssh_extra_args"):
        _no_template(host, var, variables.get(var), source)
    address = variables.get("vnetbench_address") or variables.get("ansible_host")
    address = _resolve(host, str(address) if address else host, source, explicit=bool(address))
    by_group = [g[len(SWITCH_GROUP_PREFIX):] for g in groups if g.startswith(SWITCH_GROUP_PREFIX)]
    if len(by_group) > 1:
        raise SpecError(f"{source}: host {host!r}: in groups {', '.join(SWITCH_GROUP_PREFIX + g for g in by_group)}; "
                        f"a host is on one switch")
    by_var = variables.get("vnetbench_switch")
    if by_var is not None and by_group and str(by_var) != by_group[0]:
        raise SpecError(f"{source}: host {host!r}: vnetbench_switch is {by_var!r}, but it is in group "
                        f"{SWITCH_GROUP_PREFIX}{by_group[0]}")
    switch = str(by_var) if by_var is not None else by_group[0] if by_group else None
    switch_given[host] = switch is not None
    options = []
    for var in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        if variables.get(var):
            options += shlex.split(str(variables[var]))
    key = variables.get("ansible_ssh_private_key_file")
    ssh = Ssh(user=str(variables["ansible_user"]) if variables.get("ansible_user") else None,
              port=whole_number(variables.get("ansible_port", 22), source, f"host {host!r}: ansible_port"),
              identity=os.path.expanduser(str(key)) if key else None, options=tuple(options))
    return HostEntry(name=host, address=address, switch=switch_name(switch or DEFAULT_SWITCH, source, host),
                     slots=whole_number(variables.get("vnetbench_slots", 1), source, f"host {host!r}: vnetbench_slots"),
                     ssh=ssh)


# ---- small checks ---------------------------------------------------------------------------

def _read(path: Path, option: str | None) -> str:
    return read_text(path, f"{option}: {path}" if option else str(path), "a hostfile or inventory", MAX_FILE_BYTES)


def _yaml_or_none(text: str, path: Path):
    """The YAML in ``text``; None when it is not YAML and ``path`` need not be (INI, hostfile)."""
    try:
        return read_yaml(text, str(path), "an inventory")
    except SpecError:
        if path.suffix.lower() in (".yml", ".yaml"):
            raise
        return None


def _no_template(host: str, var: str, value, source: str) -> None:
    if isinstance(value, str) and ("{{" in value or "{%" in value):
        raise SpecError(f"{source}: host {host!r}: {var} is a Jinja template ({value!r}); vnetbench reads "
                        f"inventories without Ansible: give the value itself")


def _resolve(host: str, address: str, source: str, explicit: bool = True) -> str:
    try:
        return str(ipaddress.IPv4Address(address))
    except ValueError:
        pass
    if not ADDRESS_RE.match(address):  # nothing but a name goes to the resolver
        raise SpecError(f"{source}: host {host!r}: address {address!r} is not a host name or IPv4 address; "
                        f"set ansible_host (or vnetbench_address) to its IPv4 address")
    try:
        return socket.getaddrinfo(address, None, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    except (OSError, UnicodeError):
        hint = f"{address!r} does not resolve" if explicit else "it has no ansible_host, and its name does not resolve"
        raise SpecError(f"{source}: host {host!r}: no address: {hint}; set ansible_host (or vnetbench_address) "
                        f"to its IPv4 address") from None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) not in (1, 3) or len(argv) == 3 and argv[1] != "--group":
        print("usage: python -m vnetbench.topologies.inventory FILE [--group GROUP]", file=sys.stderr)
        return 2
    try:
        topology = load_hosts(argv[0], group=argv[2] if len(argv) == 3 else None)
    except UsageError as exc:
        print(f"vnetbench: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(topology.to_dict(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
