"""Open MPI's shared-memory segments (5.x sm, 4.x vader) go into a directory of the job's, which the job's
end removes, never straight into /dev/shm: there only the job's PMIx server removes them, so singleton ranks
and killed jobs left 16 MiB files behind. A job whose vnetbench was killed is swept with its segments."""

import os
import subprocess
import sys
import uuid

import pytest

from vnetbench.engine import jobs
from vnetbench.mpi import run_env

from .conftest import LAUNCHERS_OF, LIBRARY_FILE

# Each rank lists the directory while both ranks hold their segments; rank 0 alone prints, one line a rank:
# two ranks printing at once can share a line under Open MPI 4's output forwarding (CI saw "10 [...]").
PROGRAM = ("from mpi4py import MPI; import os; comm = MPI.COMM_WORLD; comm.Barrier(); "
           "seen = comm.gather(sorted(os.listdir(os.environ['{var}']))); comm.Barrier(); "
           "[print(rank, names, flush=True) for rank, names in enumerate(seen or [])]")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("flavour, var, prefix", [
    ("openmpi5", "OMPI_MCA_btl_sm_backing_directory", "sm_segment."),
    ("openmpi4", "OMPI_MCA_btl_vader_backing_directory", "vader_segment."),
])
def test_the_ranks_segments_are_in_the_job_s_directory_and_go_with_it(flavour, var, prefix):
    launcher = LAUNCHERS_OF[flavour]
    if not os.access(launcher, os.X_OK):
        pytest.skip(f"{launcher} is missing")
    with jobs.Job(f"test-{uuid.uuid4().hex[:12]}") as job:
        # the wheel's mpi4py loads this flavour's library, as a direct launch by hand selects it
        env = run_env({**job.env(), "MPI4PY_LIBMPI": LIBRARY_FILE[flavour]})
        segments = env[var]
        # the same directory for either Open MPI, on a tmpfs (not /dev/shm itself)
        assert segments == env["OMPI_MCA_btl_sm_backing_directory"] and segments != "/dev/shm"
        done = subprocess.run([launcher, "-n", "2", "--oversubscribe", sys.executable, "-c", PROGRAM.format(var=var)],
                              capture_output=True, text=True, timeout=120, env=env)
        assert done.returncode == 0, done.stderr
        listed = [line for line in done.stdout.splitlines() if line[:1].isdigit()]
        assert len(listed) == 2 and all(prefix in line for line in listed), done.stdout
    assert not os.path.exists(segments) and not job.path.exists()


@pytest.mark.timeout(60)
def test_a_killed_vnetbench_s_job_is_swept_with_its_segment_directory():
    run_id = f"test-{uuid.uuid4().hex[:12]}"
    # a process that enters a job and dies without ending it, as vnetbench killed with SIGKILL would
    code = ("import os, signal, sys; from vnetbench.engine import jobs; job = jobs.Job(sys.argv[1]).__enter__(); "
            "print(job.env()['OMPI_MCA_btl_sm_backing_directory'], flush=True); os.kill(os.getpid(), signal.SIGKILL)")
    done = subprocess.run([sys.executable, "-c", code, run_id], capture_output=True, text=True, timeout=30)
    segments = done.stdout.strip()
    job_dir = jobs.state_root() / "jobs" / run_id
    try:
        assert done.returncode == -9 and segments and os.path.isdir(segments) and job_dir.is_dir(), done.stderr
        removed = jobs.sweep_orphans()
        assert any(run_id in line for line in removed), removed
        assert not os.path.exists(segments) and not job_dir.exists()
    finally:
        jobs.end(job_dir)
