"""Which reader a hosts ref or file is for: the ref forms, and the files the hosts backend claims.

- ``hostfile:PATH``: an Open MPI hostfile (``hostfile``);
- ``inventory:PATH``: an Ansible inventory, a YAML or INI file or a directory (``inventory``): the hosts of
  its group ``compute``, or every host when it has none;
- ``inventory:PATH#GROUP``: the hosts of GROUP; ``inventory:PATH#all`` every host, which then need not say a
  switch (``hosts check`` takes this by default);
- ``hosts:PATH`` or a bare PATH: told by its content: a YAML topology (``backend: hosts``), an inventory,
  else a hostfile.
"""

from dataclasses import dataclass
from pathlib import Path

from vnetbench.core.errors import SpecError, UsageError

from ..model import validation
from vnetbench.core.files import read_yaml
from . import hostfile, inventory, reading
from .model import HostsTopology

PREFIXES = ("hosts", "hostfile", "inventory")
FORMS = "hostfile:PATH, inventory:PATH, inventory:PATH#GROUP (#all: every host), hosts:PATH"


@dataclass(frozen=True)
class TopologyFile:
    """A YAML topology that a ref named (its data, source and line table): the backend's ``from_data`` reads it."""

    data: dict
    source: str
    lines: object


def read(ref: str, what: str = "--topology") -> HostsTopology | TopologyFile:
    """The hosts ``ref`` names (the module's docstring); UsageError/SpecError naming ``what`` or the file."""
    kind, sep, rest = ref.partition(":")
    if not sep or kind not in PREFIXES or Path(ref).exists():
        return read_path(Path(ref), what=what)
    if not rest:
        raise UsageError(f"{what}: {ref!r}: give a path; hosts refs are {FORMS}")
    if kind == "hostfile":
        return hostfile.read(reading.read(Path(rest), f"{what}: {rest}"), rest)
    if kind == "inventory":
        path, group = rest, None
        if "#" in rest and not Path(rest).exists():
            path, _, group = rest.rpartition("#")
            if not path or not group:
                raise UsageError(f"{what}: {ref!r}: expected inventory:PATH#GROUP; hosts refs are {FORMS}")
        return read_path(Path(path), "inventory", what, group)
    return read_path(Path(rest), what=what)


def read_path(path: Path, kind: str | None = None, what: str = "--topology",
              group: str | None = None) -> HostsTopology | TopologyFile:
    """A hostfile, inventory or topology file, told by its content (``kind`` "inventory": an inventory)."""
    if kind == "inventory" and path.is_dir():
        return inventory.read(path, group)
    text = reading.read(path, f"{what}: {path}")
    suffix = path.suffix.lower()
    data = reading.yaml_or_none(text, path) if suffix not in (".ini", ".cfg") else None
    if isinstance(data, dict) and "backend" in data:
        if kind == "inventory":
            raise SpecError(f"{path}: a topology file, not an Ansible inventory; give it as --topology")
        data, lines = validation.parse(text, str(path), "a topology file")
        return TopologyFile(data, str(path), lines)
    if isinstance(data, dict):
        return inventory.read(path, group, data=data)
    if kind == "inventory" or suffix in (".ini", ".cfg") or inventory.looks_ini(text):
        if suffix in (".yml", ".yaml"):
            raise SpecError(f"{path}: expected a YAML inventory (a mapping such as all: {{children: ...}})")
        return inventory.read(path, group, text=text)
    return hostfile.read(text, str(path))


def claims(path, text: str) -> bool:
    """Whether ``path`` (its text) is a hostfile or an inventory. A YAML topology (``backend: hosts``) is not
    claimed: the one loader reads it, and the backend's ``from_data`` takes it."""
    path = Path(path)
    try:
        data = read_yaml(text, str(path), "a hostfile or inventory")
    except SpecError:
        data = None
    if path.suffix.lower() in (".yml", ".yaml") and not isinstance(data, dict):
        return False
    if isinstance(data, dict):
        return "backend" not in data and inventory.is_inventory(data)
    return inventory.looks_ini(text) or bool(hostfile.host_lines(text))
