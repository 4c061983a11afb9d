"""`vnetbench sweep` with real mpirun: interrupt and resume, failures, fail-fast, up-front refusals, the default sweep."""

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from conftest import requires_mpi, vnetbench
from vnetbench.engine import studies
from vnetbench.analysis import records
from vnetbench.mpi import usable_cpus

pytestmark = requires_mpi

TINY_ALLREDUCE = ["--max-size", "1024", "--iterations", "20", "--large-iterations", "5"]


def stored(store) -> list[dict]:
    loaded = records.load(store)
    assert not loaded.skipped, loaded.warnings()  # never a half-written record
    return loaded.records


def processes_with(marker: str) -> list[str]:
    out = subprocess.run(["pgrep", "-fa", marker], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "pgrep" not in line and str(os.getpid()) != line.split()[0]]


def wait_until_gone(marker: str, seconds: float = 15) -> list[str]:
    deadline = time.monotonic() + seconds
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    return processes_with(marker)


@pytest.mark.timeout(300)
def test_sigint_mid_run_then_resume_ends_with_exactly_the_expected_runs(store):
    # a distinct iteration count marks this test's ranks among any others on the machine
    iterations = str(3000 + random.randrange(1000))
    marker = f'"iterations": {iterations}'
    argv = [sys.executable, "-m", "vnetbench", "sweep", "--kernel", "allreduce", "--topologies", "native",
            "--ranks", "2,4", "--repeat", "2", "--store", str(store), "--max-size", "1024",
            "--iterations", iterations]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (store.exists() and store.stat().st_size) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            time.sleep(0.05)
        time.sleep(0.5)  # into the next run's launch
        assert proc.poll() is None, "the sweep finished before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted:" in err and "--resume" in err
    assert wait_until_gone(marker) == []
    first = stored(store)
    assert 1 <= len(first) < 4 and all(r["status"] == "ok" for r in first)

    resumed = vnetbench(*argv[3:], "--resume", timeout=240)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"resume: {len(first)} run(s) already in the store" in resumed.stderr
    final = stored(store)
    assert sorted((r["ranks"], r["repetition"]) for r in final) == [(2, 0), (2, 1), (4, 0), (4, 1)]
    assert {r["run_id"] for r in first} <= {r["run_id"] for r in final}
    assert all(r["status"] == "ok" and r["params"]["iterations"] == int(iterations) for r in final)
    assert wait_until_gone(marker) == []

    again = vnetbench(*argv[3:], "--resume", timeout=60, check=0)
    assert "0 run(s) to do" in again.stderr and len(stored(store)) == 4


@pytest.mark.timeout(180)
def test_failed_runs_are_recorded_and_the_sweep_goes_on(store, tmp_path):
    # each run killed by its timeout, busy-polling until then: how far it got is none of this test's business
    slow = ["--kernel", "allreduce", "--topologies", "native", "--ranks", "1,2", "--iterations", "10000000",
            "--max-size", "8", "--timeout", "1", "--repeat", "1"]
    proc = vnetbench("sweep", *slow, "--store", store, check=1)
    runs = stored(store)
    assert [(r["ranks"], r["status"]) for r in runs] == [(1, "timeout"), (2, "timeout")]
    assert "2 timeout" in proc.stderr
    strict = tmp_path / "strict.jsonl"
    proc = vnetbench("sweep", *slow, "--store", strict, "--fail-fast", check=1)
    assert [(r["ranks"], r["status"]) for r in stored(strict)] == [(1, "timeout")]
    assert "stopped by --fail-fast" in proc.stderr


@pytest.mark.timeout(60)
def test_combinations_that_cannot_run_are_reported_before_anything_runs(store):
    args = ["--kernel", "allreduce", "--topologies", "native,4vm-1vswitch", "--ranks", "2", "--repeat", "1",
            "--store", store]
    proc = vnetbench("sweep", *args, "--dry-run", check=0)
    (line,) = [line for line in proc.stderr.splitlines() if "cannot run here" in line]
    assert "4vm-1vswitch" in line  # no root or netns here, or 2 ranks for 4 VMs
    assert "1 run(s) to do on 1 topology(ies)" in proc.stderr
    assert not store.exists()
    proc = vnetbench("sweep", *args, "--fail-fast", check=2)
    assert proc.stderr.startswith("vnetbench: error: --fail-fast: ") and "4vm-1vswitch" in proc.stderr
    assert not store.exists()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("args, message", [
    (["--ranks", "0"], "argument --ranks: '0': 0 is out of range"),
    (["--ranks", "2,x"], "argument --ranks: '2,x'"),
    (["--topologies", "native,nosuch"], "--topologies: nosuch:"),
    (["--kernel", "nope"], "--kernel: unknown kernel 'nope'"),
    (["--kernel", "allreduce", "--bogus", "1"], "--bogus: not an option of kernel allreduce"),
    (["--kernel", "pingpong", "--ranks", "1"], "--ranks: pingpong needs at least 2 ranks, got 1"),
    (["--study", "nope"], "argument --study: invalid choice"),
    (["--repeat", "0"], "argument --repeat"),
])
def test_bad_input_exits_2_before_anything_starts(store, args, message):
    proc = vnetbench("sweep", "--topologies", "native", *args, "--store", store, check=2)
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not store.exists()


@pytest.mark.timeout(600)
def test_default_sweep_runs_end_to_end_at_tiny_sizes(store):
    study = studies.get("quick", usable_cpus())
    tiny = {"halo": ["--steps", "5", "--global", "12,12,12"],
            "md": ["--steps", "5", "--cells", "8"]}.get(study.kernel, TINY_ALLREDUCE)
    # the study's topologies, rank counts and kernel, once each (--repeat's own runs are the tests' above, the study's
    # warm-up runs the test's below: here they would double the runs, 4-rank md on 2 cpus among them)
    proc = vnetbench("sweep", "--store", store, "--repeat", "1", "--warmup", "0", *tiny, timeout=560)
    failures = [(r["topology"]["name"], r["ranks"], r["status"], r["validation"].get("detail"))
                for r in (stored(store) if store.exists() else []) if r["status"] != "ok"]
    if failures and all("is in use by process" in str(detail) for *_, detail in failures):
        pytest.skip(f"another vnetbench process holds a topology of the default sweep: {failures[0][3]}")
    assert proc.returncode == 0, f"{failures}\n{proc.stderr[-3000:]}"
    assert "study quick" in proc.stderr and "scaled to the" in proc.stderr
    skipped = {t for t in study.topologies if f"skipped: {t} (all rank counts)" in proc.stderr}
    ran = [t for t in study.topologies if t not in skipped]
    assert "native" in ran
    runs = stored(store)
    expected = sorted((t, n, 0) for t in ran for n in study.ranks)
    assert sorted((r["topology"]["name"], r["ranks"], r["repetition"]) for r in runs) == expected
    assert all(r["status"] == "ok" and r["kernel"] == study.kernel for r in runs)
    assert "overhead" in proc.stdout and "native" in proc.stdout
    report = vnetbench("report", "--store", store, "--format", "json", check=0)
    tables = json.loads(report.stdout)["tables"]
    assert {row["topology"] for row in tables[0]["rows"]} == set(ran)


@pytest.mark.timeout(300)
def test_the_studys_warm_up_runs_before_each_configuration_and_is_not_stored(store):
    study = studies.get("quick", usable_cpus())
    assert study.warmup == 1
    tiny = {"halo": ["--steps", "5", "--global", "12,12,12"],
            "md": ["--steps", "5", "--cells", "8"]}.get(study.kernel, TINY_ALLREDUCE)
    # the default sweep's warm-up (the study's, as no --warmup is given), on one of its configurations
    topology, ranks = study.topologies[0], study.ranks[0]
    proc = vnetbench("sweep", "--store", store, "--topologies", topology, "--ranks", ranks, "--repeat", "1", *tiny,
                     timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "after 1 warm-up run(s) of each configuration (not stored)" in proc.stderr, proc.stderr
    warmed = f"{study.kernel} x{ranks} on {topology}, warm-up 1/1 (not stored): ok"
    assert warmed in proc.stderr, proc.stderr
    (run,) = stored(store)
    assert (run["topology"]["name"], run["ranks"], run["repetition"], run["status"]) == (topology, ranks, 0, "ok")
    # the warm-up came first: the stored run started after it had ended
    assert proc.stderr.index(warmed) < proc.stderr.index(f"{study.kernel} x{ranks} on {topology}, repetition")
