"""What a run's record carries beside its metrics - perf counters per rank, the environment facts - from a real
``vnetbench run`` (moved from tests/unit: they start mpirun, so they are this tier's)."""

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from conftest import direct_launch, json_lines, requires_mpi, vnetbench
from vnetbench.core import environment
from vnetbench.kernels.counters import EVENTS

pytestmark = [requires_mpi, pytest.mark.timeout(120)]

SOURCE = Path(environment.__file__).resolve().parent.parent


def test_run_counters_record_raw_ratio_and_scaled(store):
    proc = vnetbench("run", "allreduce", "--ranks", 2, "--counters", "--json", "--store", store,
                     "--max-size", "64", "--iterations", "20", check=0)
    (record,) = json_lines(proc.stdout)
    for placement in record["placement"]:
        counters = placement["counters"]
        assert counters["events"]["task_clock_ns"] > 0
        for name, value in counters["events"].items():
            assert 0 < counters["ratio"][name] <= 1.0
            assert value >= counters["raw"][name]
        for name in EVENTS:
            assert (name in counters["events"]) != (name in counters["unavailable"])


def source_facts() -> dict:
    """What git itself says of the checkout vnetbench runs from."""
    if not (SOURCE / ".git").exists():
        return {"git_revision": None, "git_dirty": None}
    git = ["git", "-C", str(SOURCE)]
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True)
    status = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True,
                            timeout=10, check=True)
    return {"git_revision": head.stdout.strip(), "git_dirty": bool(status.stdout.strip())}


def test_run_records_the_environment_facts(store):
    proc = vnetbench("run", "halo", "--ranks", 2, "--json", "--store", store, check=0)
    (record,) = json_lines(proc.stdout)
    env = record["environment"]
    assert env["versions"]["numba"] == metadata.version("numba")
    assert len(env["load_average"]) == 3 and all(x >= 0 for x in env["load_average"])
    assert set(env["cpu"]) == {"governor", "boost", "smt"}
    # what git says (handed to rank 0 by the launcher here: tests/unit/test_environment_facts.py)
    assert {key: env[key] for key in ("git_revision", "git_dirty")} == source_facts()


def test_a_direct_launch_asks_git_itself_and_refuses_malformed_facts(tmp_path):
    # no launcher to hand the facts over: rank 0 asks git
    smoke = ["--max-size", "64", "--iterations", "5"]
    done, record = direct_launch("allreduce", 2, smoke, tmp_path)
    assert done.returncode == 0 and record is not None, done.stderr[-2000:]
    assert {key: record["environment"][key] for key in ("git_revision", "git_dirty")} == source_facts()
    # facts of the wrong shape in --context are a launcher's bug: refused (exit 2), not replaced quietly
    (tmp_path / "record.json").unlink()
    done, record = direct_launch("allreduce", 2, [*smoke, "--context", '{"vnetbench_git": {"git_revision": "x"}}'],
                                 tmp_path)
    assert done.returncode == 2 and record is None, done.stderr[-2000:]
    # what a rank says (mpirun may drop it when it ends the job at the first rank's exit): its parser's refusal
    said = subprocess.run([sys.executable, "-m", "vnetbench.kernels", "allreduce", *smoke, "--context",
                           '{"vnetbench_git": {"git_revision": "x"}}'], capture_output=True, text=True, timeout=60)
    assert said.returncode == 2 and said.stderr.strip().splitlines() == [
        "vnetbench.kernels: error: --context: vnetbench_git: expected {git_revision: string or null, git_dirty: "
        "boolean or null}"], said.stderr
