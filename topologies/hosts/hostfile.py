"""Open MPI hostfiles read as hosts topologies.

A hostfile is Open MPI's (``HOST [slots=N] [max_slots=N]``); vnetbench reads what Open MPI ignores, comments:
``# vnetbench: name=NAME network=CIDR placement=block venv=PATH`` on a line of its own, and
``# vnetbench: switch=NAME name=LABEL`` after a host (LABEL names the host in records, where the hostfile gives
an address). Problems are named by line: ``FILE:LINE: host 'x': slots: what``.
"""

from vnetbench.core.errors import SpecError

from .model import HostsTopology, Read, from_read
from .reading import host_name, resolve

TOPOLOGY_SETTINGS = {"name": "name", "network": "subnet", "placement": "placement", "venv": "venv"}
HOST_SETTINGS = {"switch", "name"}


def read(text: str, source: str) -> HostsTopology:
    """The hosts of hostfile ``text`` (read from ``source``) as a validated topology."""
    found = Read(source)
    for number, raw in enumerate(text.splitlines(), start=1):
        if raw.strip().startswith("#"):
            settings = _directive(raw.strip()[1:].strip(), source, number, set(TOPOLOGY_SETTINGS))
            found.fields.update({TOPOLOGY_SETTINGS[key]: value for key, value in settings.items()})
    seen = {}
    for number, tokens, comment in host_lines(text):
        name = tokens[0]
        where = f"{source}:{number}"
        if "@" in name:
            raise SpecError(f"{where}: {name!r}: user@host is not read by vnetbench; use an Ansible inventory "
                            f"with ansible_user")
        host_name(name, where)
        if name in seen:
            raise SpecError(f"{where}: host {name!r} is listed twice (first on line {seen[name]})")
        seen[name] = number
        host = {}
        for token in tokens[1:]:
            key, sep, value = token.partition("=")
            if key == "slots" and sep:
                host["slots"] = value
            elif key in ("max_slots", "max-slots") and sep:
                # Open MPI's, not vnetbench's (it writes its own hostfile): only its form is checked
                if not value.isdigit():
                    raise SpecError(f"{where}: host {name!r}: {key}: {value!r} is not a whole number")
            else:
                raise SpecError(f"{where}: host {name!r}: {token!r} is not a hostfile option; allowed: slots=N, "
                                f"max_slots=N")
        per_host = _directive(comment, source, number, HOST_SETTINGS)
        label = host_name(per_host.get("name", name), where, "name")
        host.update(name=label, address=resolve(label, name, where))
        if "switch" in per_host:
            host["switch"] = per_host["switch"]
        found.hosts.append((where, host))
    if not found.hosts:
        raise SpecError(f"{source}: no hosts (a hostfile lists one host per line: HOST [slots=N])")
    return from_read(found)


def host_lines(text: str) -> list[tuple[int, list[str], str]]:
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
