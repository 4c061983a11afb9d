"""What the readers of hostfiles and inventories share: a file read within bounds, a host's name checked before it is
used, and its address resolved (a name reaches the resolver only when it is one)."""

import ipaddress
import re
import socket
from pathlib import Path

from vnetbench.core.errors import SpecError

from vnetbench.core.files import read_text, read_yaml
from .model import HOST_NAME, is_host_name

MAX_FILE_BYTES = 1 << 20
# a DNS name (labels of letters, digits, '-' and '_', joined by dots) or an IPv4 address
ADDRESS_RE = re.compile(r"^(?=.{1,253}\Z)[A-Za-z0-9_](?:[A-Za-z0-9_-]*)(?:\.[A-Za-z0-9_-]+)*\.?\Z")


def read(path: Path, label: str | None = None) -> str:
    """The file's text; SpecError naming ``label`` (default: the path) when it cannot be read or is too large."""
    return read_text(path, label or str(path), "a hostfile or inventory", MAX_FILE_BYTES)


def yaml_or_none(text: str, path: Path):
    """The YAML in ``text``; None when it is not YAML and ``path`` need not be (INI, hostfile)."""
    try:
        return read_yaml(text, str(path), "an inventory")
    except SpecError:
        if path.suffix.lower() in (".yml", ".yaml"):
            raise
        return None


def host_name(value, where: str, what: str = "host") -> str:
    """``value`` when it is a host name: checked where it is read, before it names a file (host_vars/NAME.yml)
    or reaches the resolver."""
    if not is_host_name(value):
        raise SpecError(f"{where}: {what} {value!r} is not {HOST_NAME}")
    return value


def resolve(host: str, address: str, where: str, explicit: bool = True) -> str:
    """The IPv4 address of ``host``, given as ``address`` (an address, or a name to resolve)."""
    try:
        return str(ipaddress.IPv4Address(address))
    except ValueError:
        pass
    if not ADDRESS_RE.match(address):  # nothing but a name goes to the resolver
        raise SpecError(f"{where}: host {host!r}: address {address!r} is not a host name or IPv4 address; "
                        f"set ansible_host (or vnetbench_address) to its IPv4 address")
    try:
        return socket.getaddrinfo(address, None, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    except (OSError, UnicodeError):
        hint = f"{address!r} does not resolve" if explicit else "it has no ansible_host, and its name does not resolve"
        raise SpecError(f"{where}: host {host!r}: no address: {hint}; set ansible_host (or vnetbench_address) "
                        f"to its IPv4 address") from None
