"""The docs' shell examples marked ``runs as root`` (docs/tests.md), run as written in a folder of their own:
real namespaces and bridges; the host is left as found."""

import pytest

from emulation.conftest import requires_netns
from harness import doc_examples

pytestmark = [requires_netns, pytest.mark.timeout(180)]
BLOCKS = doc_examples.marked("emulation")


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_the_example_runs_as_root(block, tmp_path, host_unchanged):
    host_unchanged(*[argv[3] for argv in doc_examples.commands(block) if argv[1:3] == ["topology", "up"]])
    done = doc_examples.run(block, tmp_path)
    assert done.returncode == 0, f"{block.where}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
