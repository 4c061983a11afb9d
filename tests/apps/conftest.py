"""The applications tier: a real MPI program (Debian's LAMMPS) run through the real CLI.

Skips with a reason where LAMMPS is missing (scripts/test installs Debian's ``lammps`` when it
can). The LJ problem is small (8x8x8 cells, 2,048 atoms, 100 steps: about a second a run).
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import hoststate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LMP = shutil.which("lmp")
requires_lammps = pytest.mark.skipif(LMP is None, reason="applications tier: no LAMMPS 'lmp' on PATH "
                                                         "(Debian: apt-get install lammps)")


@pytest.fixture(autouse=True)
def shm_unchanged():
    """Every test leaves /dev/shm as it found it (an Open MPI segment nobody removes is 16 MiB lost)."""
    with hoststate.shm_unchanged():
        yield


@pytest.fixture
def lj_app(tmp_path) -> Path:
    """The shipped LJ example, scaled down, in a folder of its own (the YAML's paths resolve there)."""
    folder = tmp_path / "lj"
    folder.mkdir()
    shutil.copy(EXAMPLES / "lammps" / "in.lj", folder / "in.lj")
    text = (EXAMPLES / "lammps" / "lammps-lj.yaml").read_text()
    assert 'c, "20"' in text
    (folder / "lammps-lj.yaml").write_text(text.replace('c, "20"', 'c, "8"'))
    return folder / "lammps-lj.yaml"


def app_file(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def leftovers(tmp_path: Path) -> list[str]:
    """Processes this test may have left: a launcher of this venv's wrapper (its argv names it), or anything
    naming the test's files (other jobs on the machine run their own, which are not ours to judge)."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True).stdout.splitlines()
    marks = (f"{sys.executable} -m vnetbench.apps.wrapper", str(tmp_path))
    return [line for line in out if any(mark in line for mark in marks) and "pytest" not in line]
