"""The docs' shell examples marked ``runs with LAMMPS`` (docs/tests.md), run as written in a folder of their own:
Debian's LAMMPS under real mpirun, through the CLI."""

import pytest

from apps.conftest import requires_lammps
from conftest import requires_mpi
from harness import doc_examples

pytestmark = [requires_mpi, requires_lammps, pytest.mark.timeout(180)]
BLOCKS = doc_examples.marked("apps")


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_the_example_runs_with_lammps(block, tmp_path):
    done = doc_examples.run(block, tmp_path)
    assert done.returncode == 0, f"{block.where}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    records = (tmp_path / "vnetbench-results" / "results.jsonl").read_text().splitlines()
    assert len(records) > len(doc_examples.STUDY.read_text().splitlines())  # the run was stored
