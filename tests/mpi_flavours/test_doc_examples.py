"""The docs' shell examples marked ``runs with Debian's MPIs`` (docs/tests.md), run as written in a folder of their
own: a C program built with Debian's MPICH, refused under the wrong MPI and run on an emulated topology."""

import os

import pytest

from conftest import requires_mpi
from emulation.conftest import host_unchanged, requires_netns  # noqa: F401 (a fixture)
from harness import doc_examples
from mpi_flavours.conftest import FLAVOURS, LAUNCHERS_OF

pytestmark = [requires_mpi, requires_netns, pytest.mark.timeout(180)]
BLOCKS = doc_examples.marked("mpi_flavours")


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_the_example_runs_with_debians_mpis(block, tmp_path, host_unchanged):  # noqa: F811
    for path in (FLAVOURS["mpich"][0], LAUNCHERS_OF["mpich"]):
        if not os.access(path, os.X_OK):
            pytest.skip(f"MPI flavours tier: {path} is missing")
    host_unchanged(*{argv[argv.index("--topology") + 1] for argv in doc_examples.commands(block)
                     if argv[:2] == ["vnetbench", "exec"] and "--topology" in argv} - {"native"})
    done = doc_examples.run(block, tmp_path)
    assert done.returncode == 0, f"{block.where}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    shown = [line.lstrip("# ") for line in block.text.splitlines() if line.startswith("# rank ")]
    assert shown and all(line in done.stdout.splitlines() for line in shown), done.stdout  # the output the page shows
