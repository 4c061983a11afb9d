"""--profile's edges with real jobs: a program that never calls MPI_Init gets no profile (said, exit 1, never a
profile passed off as whole); a trace over its cap is kept marked truncated; a cut trace file is refused (exit 2).
The exact counts of profiles are checked in the MPI-flavours tier (pingpong and halo with each MPI) and the apps
tier (LAMMPS)."""

import json
import os
import subprocess
import sys

import pytest

from conftest import requires_mpi, vnetbench

pytestmark = [requires_mpi, pytest.mark.timeout(120)]


def test_a_program_that_never_calls_mpi_init_has_no_profile_and_exits_1(store):
    proc = vnetbench("exec", "--topology", "native", "--ranks", 2, "--profile", "--store", store, "--", "true")
    (record,) = [json.loads(line) for line in store.read_text().splitlines()]
    assert record["status"] == "ok" and record["exit_status"] == 0  # the program itself did what it does
    profile = record["profile"]
    assert profile["status"] == "unavailable" and profile["ranks_profiled"] == 0 and "calls" not in profile
    assert "did not call MPI_Init" in profile["reason"] and "linked statically" in profile["reason"]
    assert proc.returncode == 1
    said = [line for line in proc.stderr.splitlines() if "profile unavailable" in line]
    assert len(said) == 1 and "did not call MPI_Init" in said[0], proc.stderr


def test_a_trace_over_its_cap_is_marked_truncated_and_a_cut_file_is_refused(store, tmp_path):
    proc = vnetbench("run", "allreduce", "--ranks", 2, "--profile", "trace", "--store", store, "--json",
                     "--max-size", "64", "--iterations", "40", "--large-iterations", "2",
                     env={**os.environ, "VNETBENCH_PROFILE_TRACE_CAP": "4096"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    (record,) = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    profile = record["profile"]
    kept = profile["trace"]
    assert profile["status"] == "ok" and kept["truncated"] and kept["dropped"] > 0
    # the summary is whole whatever the trace's cap: every Allreduce counted
    assert profile["calls"]["MPI_Allreduce"]["calls"] > kept["events"]
    path = store.parent / kept["path"]
    shown = subprocess.run([sys.executable, "-m", "vnetbench.profile.trace", str(path)], capture_output=True,
                           text=True)
    assert shown.returncode == 0 and "2 ranks, truncated" in shown.stdout, shown.stderr
    cut = tmp_path / "cut.trace.gz"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    refused = subprocess.run([sys.executable, "-m", "vnetbench.profile.trace", str(cut)], capture_output=True,
                             text=True)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "truncated or corrupt" in refused.stderr and str(cut) in refused.stderr
