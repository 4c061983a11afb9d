"""The MPI-flavours tier: real jobs with three MPIs (the Open MPI 5 wheel, Debian's Open MPI 4.1, Debian's MPICH 4.0).

The kernels run from the venv the tests run in, whose mpi4py is the PyPI wheel: ``--mpi`` makes the ranks load
each MPI's own library (no mpi4py is built). A C hello is built by the test with each MPI's mpicc. A flavour
whose MPI is missing is skipped with the reason (Debian: openmpi-bin libopenmpi-dev, mpich libmpich-dev).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import hoststate
from harness.launchers import LAUNCHERS_OF  # noqa: F401 (the tier's modules import it from here)

HERE = Path(__file__).parent
BIN = Path(sys.executable).parent
DEBIAN_LIB = "/usr/lib/x86_64-linux-gnu"
# flavour -> (its mpicc, how vnetbench names its launcher's flavour)
FLAVOURS = {
    "openmpi5": (str(BIN / "mpicc"), "openmpi5"),
    "openmpi4": ("/usr/bin/mpicc.openmpi", "openmpi4"),
    "mpich": ("/usr/bin/mpicc.mpich", "mpich"),
}
# flavour -> the library file its ranks must load (by its soname; the record names the real path)
LIBRARY_FILE = {"openmpi5": str(BIN.parent / "lib" / "libmpi.so.40"), "openmpi4": f"{DEBIAN_LIB}/libmpi.so.40",
                "mpich": f"{DEBIAN_LIB}/libmpich.so.12"}
# what MPI.Get_library_version() starts with on the ranks of each flavour
LIBRARY = {"openmpi5": "Open MPI v5.", "openmpi4": "Open MPI v4.", "mpich": "MPICH Version:"}
VERSION = {"openmpi5": "Open MPI 5.", "openmpi4": "Open MPI 4.", "mpich": "MPICH 4."}
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


def launcher_of(name: str) -> str:
    """The launcher of flavour ``name``; skips when that MPI is not installed."""
    path = LAUNCHERS_OF[name]
    if not os.access(path, os.X_OK):
        pytest.skip(f"MPI flavours tier: {path} is missing")
    return path


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


# flavour -> (the launcher a script in a fake installation runs, the library that installation's lib/ holds as
# the flavour's soname, what the ranks then load): an installation whose library is another MPI's
WRONG = {
    "openmpi5": (LAUNCHERS_OF["openmpi5"], ("libmpi.so.40", LIBRARY_FILE["openmpi4"]), "Open MPI 4."),
    "openmpi4": (LAUNCHERS_OF["openmpi4"], ("libmpi.so.40", LIBRARY_FILE["openmpi5"]), "Open MPI 5."),
    "mpich": ("/usr/bin/mpiexec.hydra", ("libmpi.so.12", LIBRARY_FILE["openmpi4"]), "Open MPI 4."),
}


@pytest.fixture(scope="session")
def wrong_install(tmp_path_factory):
    """flavour -> the launcher of an installation PREFIX/bin + PREFIX/lib whose bin/ runs that flavour's own
    launcher and whose lib/ holds another MPI's library under the flavour's soname."""

    def get(name: str) -> str:
        real, (soname, library), _ = WRONG[name]
        for path in (real, library):
            if not os.path.exists(path):
                pytest.skip(f"MPI flavours tier: {path} is missing")
        prefix = tmp_path_factory.mktemp(f"wrong-{name}")
        (prefix / "bin").mkdir()
        (prefix / "lib").mkdir()
        launcher = prefix / "bin" / os.path.basename(LAUNCHERS_OF[name])
        launcher.write_text(f'#!/bin/sh\nexec {real} "$@"\n')
        launcher.chmod(0o755)
        (prefix / "lib" / soname).symlink_to(library)
        return str(launcher)

    return get


def cli(python: str, *args, timeout=120, env=None, cwd=None) -> subprocess.CompletedProcess:
    """The real ``vnetbench`` command of the venv whose Python is ``python``."""
    # the default choice comes from the test, not from the shell that ran pytest
    env = {**{k: v for k, v in os.environ.items() if k != "VNETBENCH_MPI"}, **(env or {})}
    return subprocess.run([python, "-m", "vnetbench", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd)
