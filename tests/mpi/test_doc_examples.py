"""The docs' shell examples marked ``runs`` and ``dry-run`` (docs/tests.md), run as written in a folder of their
own: real commands, real mpirun; under ``dry-run`` each ``vnetbench sweep`` with ``--dry-run``."""

import pytest

from conftest import requires_mpi
from harness import doc_examples

pytestmark = [requires_mpi, pytest.mark.timeout(180)]
BLOCKS = doc_examples.marked("mpi")


def test_there_are_examples_to_run():
    assert {b.mark for b in BLOCKS} == {"runs", "dry-run"}


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_the_example_runs(block, tmp_path):
    done = doc_examples.run(block, tmp_path)
    assert done.returncode == 0, f"{block.where}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    if block.mark == "dry-run":  # nothing was run: the stores hold what the folder was given
        seeded = doc_examples.STUDY.read_text()
        for store in tmp_path.rglob("*.jsonl"):
            assert store.read_text() in ("", seeded), store
