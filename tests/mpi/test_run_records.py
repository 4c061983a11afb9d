"""What a run's record carries beside its metrics - perf counters per rank, the environment facts - from a real
``vnetbench run`` (moved from tests/unit: they start mpirun, so they are this tier's)."""

import subprocess
from importlib import metadata
from pathlib import Path

import pytest

from conftest import json_lines, requires_mpi, vnetbench
from vnetbench import environment
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


def test_run_records_the_environment_facts(store):
    proc = vnetbench("run", "halo", "--ranks", 2, "--json", "--store", store, check=0)
    (record,) = json_lines(proc.stdout)
    env = record["environment"]
    assert env["versions"]["numba"] == metadata.version("numba")
    assert len(env["load_average"]) == 3 and all(x >= 0 for x in env["load_average"])
    assert set(env["cpu"]) == {"governor", "boost", "smt"}
    if (SOURCE / ".git").exists():
        status = subprocess.run(["git", "-C", str(SOURCE), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10)
        assert env["git_dirty"] is bool(status.stdout.strip())
    else:
        assert env["git_dirty"] is None
