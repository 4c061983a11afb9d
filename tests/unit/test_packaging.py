"""What a wheel holds is setup.cfg's package list and package data: every package of the three source folders is in
it, and every file a package reads at run time that is not Python (C sources built on the machine that runs them,
guests' scripts). A package left out installs a vnetbench that fails at import on the hosts Ansible deploys to."""

import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = (".c", ".sh")


def _cfg():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    return cfg


def _folders() -> dict[str, Path]:
    """Import name -> folder, from setup.cfg's package_dir mapping."""
    mapping = {}
    for line in _cfg()["options"]["package_dir"].strip().splitlines():
        name, _, folder = (part.strip() for part in line.partition("="))
        mapping[name] = ROOT / folder
    return mapping


def _packages_on_disk() -> dict[str, Path]:
    found = {}
    for name, folder in _folders().items():
        for init in folder.rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            rest = init.parent.relative_to(folder).parts
            found[".".join((name, *rest))] = init.parent
    # a folder mapped on its own (vnetbench.kernels) is that package, not a subpackage of its parent's folder
    return {name: path for name, path in found.items()
            if not any(path == other and name != mapped for mapped, other in _folders().items())}


def test_every_package_is_in_the_wheel():
    listed = set(_cfg()["options"]["packages"].split())
    on_disk = set(_packages_on_disk())
    assert on_disk - listed == set(), f"packages missing from setup.cfg's [options] packages: {on_disk - listed}"
    assert listed - on_disk == set(), f"setup.cfg lists packages that do not exist: {listed - on_disk}"


def test_every_data_file_a_package_reads_is_in_the_wheel():
    data = _cfg()["options.package_data"]
    for name, folder in _packages_on_disk().items():
        files = {path.name for path in folder.iterdir() if path.suffix in DATA}
        kept = {entry.strip() for entry in data.get(name, "").split(",") if entry.strip()}
        assert files <= kept, f"{name}: {sorted(files - kept)} not in setup.cfg's [options.package_data]"
