"""predict end to end on this host: a real profiled halo run (--profile trace), a real calibration of native,
and the prediction of native from native's own calibration.

How close the replay comes to the measured time is a performance question (benchmarks/predict.py measures it);
here the tolerance is what the model guarantees by construction: both replays keep every rank's computation as
profiled and replace only the time inside MPI calls, so the replay of native lies between the slowest rank's
computation and its measured elapsed time plus the model's own cost of the messages; predicting native for
native adds nothing."""

import json

import pytest

from conftest import requires_mpi, vnetbench

pytestmark = [pytest.mark.timeout(240), requires_mpi]


def test_native_predicted_from_its_own_calibration_lands_on_native(tmp_path):
    store = tmp_path / "s.jsonl"
    done = vnetbench("run", "halo", "--global", "24,24,24", "--steps", "20", "--profile", "trace", "--store", store,
                     "--json", timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    profiled = json.loads(done.stdout.splitlines()[-1])
    done = vnetbench("calibrate", "--topology", "native", "--store", store, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "host" in done.stdout and "allreduce x2" in done.stdout
    done = vnetbench("predict", "--profile", profiled["run_id"], "--topology", "native", "--store", store,
                     "--program", "halo", "--ranks", "2", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    p = json.loads(done.stdout)
    calibration = [json.loads(line) for line in store.read_text().splitlines()][1]
    assert p["rests_on"] == {"topology": [calibration["run_id"]], "baseline": [calibration["run_id"]]}
    assert p["extrapolated"] is False and p["paths"]["host"]["how"] == "measured"
    assert p["overhead_pct"] == 0 and p["elapsed_s"] == p["baseline_elapsed_s"]

    from vnetbench.profile import trace as reader

    trace = reader.load_trace(profiled, store)
    measured = max(trace.elapsed)
    assert p["baseline_elapsed_s"] == pytest.approx(measured)
    in_mpi = [sum(e.t1 - e.t0 for e in trace.events(r)) for r in range(trace.ranks)]
    computed = [trace.elapsed[r] - in_mpi[r] for r in range(trace.ranks)]
    modelled = sum(row["seconds"] for row in p["breakdown"]["calls"].values())
    replay = p["replay"]["baseline_s"]
    assert max(computed) - 1e-9 <= replay <= measured + modelled + 1e-9
    # halo's 26 neighbours: every step's messages were replayed over the host path (or to itself, at 2 ranks)
    sent = sum(row["messages"] for row in p["breakdown"]["paths"].values())
    assert sent == 2 * 20 * 26 and set(p["breakdown"]["paths"]) <= {"host", "self"}
    assert p["breakdown"]["calls"]["MPI_Allreduce"]["calls"] >= 2 * 20
