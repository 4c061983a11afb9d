"""The Slurm tier: a real Slurm cluster on this host (munge, slurmctld, four slurmd on two leaf switches).

The cluster is brought up once for the module that uses it (about a second) and torn down after it,
even when a test failed: processes, namespaces, bridges and files. Skipped with a reason when Slurm
or root is missing (Debian: apt-get install slurm-wlm munge).
"""

import json
import os
import shutil
import time

import pytest

from harness import hoststate
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


@pytest.fixture(autouse=True)
def nothing_left():
    """Every test leaves no Open MPI segment in /dev/shm and no vnetbench job directory whose process is gone
    (the tier kills jobs, ranks and nodes hard: what they held must still go). Fails naming them, after
    removing them; other sessions' running jobs keep theirs."""
    before = job_dirs()
    with hoststate.shm_unchanged():
        yield
        deadline = time.monotonic() + 10.0
        while True:
            left = sorted(path for path in job_dirs() - before if not owner_alive(path))
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        for path in left:
            shutil.rmtree(path, ignore_errors=True)
            shutil.rmtree(f"/dev/shm/vnetbench-job-{os.path.basename(path)}", ignore_errors=True)
    assert not left, "left behind: vnetbench job directories " + ", ".join(left)


def job_dirs() -> set[str]:
    """vnetbench's job directories (jobs.py: one per MPI job, under the state root)."""
    from vnetbench.core.rundir import state_root

    folder = state_root() / "jobs"
    try:
        return {str(folder / name) for name in os.listdir(folder)}
    except OSError:
        return set()


def owner_alive(path: str) -> bool:
    from vnetbench.core.procs import start_time

    try:
        owner = json.loads(open(os.path.join(path, "owner.json")).read())
    except (OSError, ValueError):
        return False
    return start_time(owner.get("pid", -1)) == owner.get("start")
