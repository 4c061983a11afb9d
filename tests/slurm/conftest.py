"""The Slurm tier: a real Slurm cluster on this host (munge, slurmctld, four slurmd on two leaf switches).

The cluster is brought up once for the module that uses it (about a second) and torn down after it,
even when a test failed: processes, namespaces, bridges and files. Skipped with a reason when Slurm
or root is missing (Debian: apt-get install slurm-wlm munge).
"""

import pytest

from harness.slurm_cluster import SlurmCluster, missing_requirements


@pytest.fixture(scope="module")
def cluster():
    reason = missing_requirements()
    if reason:
        pytest.skip(f"Slurm tier: {reason}")
    with SlurmCluster(switches=2, per_switch=2) as up:
        yield up


@pytest.fixture(autouse=True)
def settled(request):
    """Each test starts on a settled cluster: no job queued or running, every node idle (a job ended by
    the previous test may hold its nodes COMPLETING for seconds on a loaded machine)."""
    if "cluster" in request.fixturenames:
        request.getfixturevalue("cluster").settle()
    yield
