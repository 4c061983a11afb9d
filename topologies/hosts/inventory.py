"""Ansible inventories read as hosts topologies: YAML or INI files with group_vars/ and host_vars/ beside them, or
anything ``ansible-inventory --list`` reads (directories, plugins, vault) when ansible-core is installed.

From each host's variables (host over group, deeper groups over shallower, as Ansible merges them) vnetbench
takes: its address (``vnetbench_address``, else ``ansible_host``, else its name, resolved), its switch
(``vnetbench_switch``, or membership of a group ``switch_<name>``), ``vnetbench_slots`` (default 1), how to reach
it (``ansible_user``, ``ansible_port``, ``ansible_ssh_private_key_file``, ``ansible_ssh_common_args``,
``ansible_ssh_extra_args``) and, the same on every host, ``vnetbench_network`` (the network MPI traffic stays
on; default: the /24 all addresses share), ``vnetbench_venv``, ``vnetbench_placement`` and
``vnetbench_topology_name``. The hosts are those of the group asked for; by default of ``compute`` when there
is one, else every host. Problems name the host: ``FILE: host 'x': slots: what``.
"""

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from vnetbench.core.errors import SpecError

from .model import HostsTopology, Read, from_read
from .reading import host_name, read as read_file, resolve, yaml_or_none

COMPUTE_GROUP = "compute"
EVERY_HOST = "all"
SWITCH_GROUP_PREFIX = "switch_"
GROUP_KEYS = ("children", "hosts", "vars")
# variables that must be the same on every host: variable -> topology field
SHARED_VARS = {"vnetbench_network": "subnet", "vnetbench_venv": "venv", "vnetbench_placement": "placement",
               "vnetbench_topology_name": "name"}
HOST_VARS = ("vnetbench_address", "ansible_host", "vnetbench_switch", "vnetbench_slots", "ansible_user",
             "ansible_port", "ansible_ssh_private_key_file", "ansible_ssh_common_args", "ansible_ssh_extra_args")


def read(path: Path, group: str | None = None, *, data: dict | None = None, text: str | None = None) -> HostsTopology:
    """The hosts of ``group`` in the inventory ``path`` (a directory: through ansible-inventory alone; else
    its parsed YAML ``data`` or its INI ``text``) as a validated topology.

    ``group``: default ``compute`` when there is one, else every host; ``all`` is every host, and then hosts
    need not say a switch (a head node has none), where otherwise a host must when the others do.
    """
    source = str(path)
    if path.is_dir():  # Ansible's form: Ansible reads it
        found = _by_ansible(path)
        if found is None:
            raise SpecError(f"{path} is a directory; reading inventory directories needs ansible-inventory "
                            f"(pip install ansible-core), else give one file")
        return _topology(found, source, path, group)
    inventory = _by_ansible(path) or (_yaml_inventory(data, source) if data is not None else
                                      _ini_inventory(text, source))
    return _topology(inventory, source, path.parent, group)


def looks_ini(text: str) -> bool:
    return any(re.match(r"^\s*\[[^\]]+\]\s*$", line) for line in text.splitlines())


def is_inventory(data: dict) -> bool:
    """Whether parsed YAML ``data`` reads as an Ansible inventory: groups of hosts, vars and children."""
    return all(value is None or isinstance(value, dict) and set(value) <= set(GROUP_KEYS) for value in data.values())


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
        unknown = sorted(set(map(str, body)) - set(GROUP_KEYS))
        if unknown:
            import difflib

            close = difflib.get_close_matches(unknown[0], GROUP_KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise SpecError(f"{source}: group {name!r}: unknown field {unknown[0]!r}{hint}; "
                            f"allowed: {', '.join(GROUP_KEYS)}")
        hosts = body.get("hosts") or {}
        if not isinstance(hosts, dict):
            raise SpecError(f"{source}: group {name!r}: hosts: expected a mapping of host names "
                            f"(host: or host: {{ansible_host: ...}}), got {type(hosts).__name__}")
        for host, variables in hosts.items():
            host_name(host, f"{source}: group {name!r}")
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
    """The inventory as ansible-inventory lists it (``ansible_inventory``), or None."""
    from . import ansible_inventory

    found = ansible_inventory.read(path)
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
            hosts = [host_name(host, where) for host in _expand(tokens[0], where)]
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


def _topology(inv: _Inventory, source: str, base: Path, group: str | None) -> HostsTopology:
    _load_var_dirs(inv, base, source)
    if group is not None and group not in inv.groups:
        raise SpecError(f"{source}: no group {group!r}; groups: {', '.join(sorted(inv.groups))} "
                        f"(inventory:PATH#GROUP names one)")
    chosen = group or (COMPUTE_GROUP if COMPUTE_GROUP in inv.groups else EVERY_HOST)
    names = _members(inv, chosen) if chosen != EVERY_HOST else list(inv.host_vars)
    if not names:
        raise SpecError(f"{source}: group {chosen!r} has no hosts")
    ancestry = _ancestry(inv)
    found, shared, switch_given = Read(source), {}, {}
    for host in names:
        variables = {}
        for name in ancestry[host]:
            variables.update(inv.groups[name].vars)
        variables.update(inv.host_vars[host])
        found.hosts.append((source, _host(host, variables, ancestry[host], source, switch_given)))
        for var in SHARED_VARS:
            value = variables.get(var)
            _no_template(host, var, value, source)
            if var in shared and shared[var][1] != value:
                raise SpecError(f"{source}: host {host!r}: {var} is {value!r}, but {shared[var][0]!r} has "
                                f"{shared[var][1]!r}; it must be the same on every host")
            shared.setdefault(var, (host, value))
    if any(switch_given.values()) and group != EVERY_HOST:
        missing = [h for h, given in switch_given.items() if not given]
        if missing:
            raise SpecError(f"{source}: host {missing[0]!r}: no switch: add it to a group switch_<name> or set "
                            f"vnetbench_switch, as the other hosts have")
    found.fields = {field_: shared[var][1] for var, field_ in SHARED_VARS.items() if shared[var][1] is not None}
    return from_read(found)


def _load_var_dirs(inv: _Inventory, base: Path, source: str) -> None:
    """group_vars/ and host_vars/ beside the inventory, as Ansible reads them (files NAME.yml, .yaml, NAME)."""
    if inv.merged:
        return
    for kind, targets in (("group_vars", inv.groups), ("host_vars", inv.host_vars)):
        for name in list(targets):
            for suffix in (".yml", ".yaml", ""):
                path = base / kind / f"{name}{suffix}"
                if path.is_file():
                    data = yaml_or_none(read_file(path), path)
                    if not isinstance(data, dict):
                        raise SpecError(f"{path}: expected a mapping of variables")
                    (targets[name].vars if kind == "group_vars" else targets[name]).update(data)


def _host(host: str, variables: dict, groups: list[str], source: str, switch_given: dict) -> dict:
    """The fields of ``host`` (its merged ``variables``, the ``groups`` it is in), as the model names them."""
    for var in HOST_VARS:
        _no_template(host, var, variables.get(var), source)
    address = variables.get("vnetbench_address") or variables.get("ansible_host")
    address = resolve(host, str(address) if address else host, source, explicit=bool(address))
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
            try:
                options += shlex.split(str(variables[var]))
            except ValueError as exc:
                raise SpecError(f"{source}: host {host!r}: {var}: cannot read {variables[var]!r}: {exc}") from None
    key = variables.get("ansible_ssh_private_key_file")
    ssh = {"user": str(variables["ansible_user"]) if variables.get("ansible_user") else None,
           "port": variables.get("ansible_port", 22), "identity": os.path.expanduser(str(key)) if key else None,
           "options": options}
    fields = {"name": host, "address": address, "slots": variables.get("vnetbench_slots", 1), "ssh": ssh}
    return {**fields, "switch": switch} if switch is not None else fields


def _no_template(host: str, var: str, value, source: str) -> None:
    if isinstance(value, str) and ("{{" in value or "{%" in value):
        raise SpecError(f"{source}: host {host!r}: {var} is a Jinja template ({value!r}); vnetbench reads "
                        f"inventories without Ansible: give the value itself")
