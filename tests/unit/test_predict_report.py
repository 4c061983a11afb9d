"""``report`` shows a stored prediction beside the runs it predicts (vnetbench.analysis.predictions), and leaves
calibrations and predictions out of the study's tables."""

import json

import pytest

from vnetbench.cli import main


def run(topology, elapsed, rep, run_id):
    return {"schema_version": 1, "run_id": run_id, "started_at": "2026-11-29T00:00:00.000+00:00", "kernel": "halo",
            "params": {}, "topology": {"name": topology}, "ranks": 2, "repetition": rep, "status": "ok",
            "metrics": {"elapsed_s": elapsed}, "validation": {"passed": True}, "placement": [{}, {}],
            "environment": {}}


def prediction(delta):
    p = {"program": "halo", "ranks": 2, "topology": "2vm-2vswitch", "baseline_topology": "native", "delta_s": delta,
         "overhead_pct": 1.0, "profile": "p1", "extrapolated": False}
    return {**run("2vm-2vswitch", 0, 0, "pred"), "kernel": "prediction", "metrics": {}, "prediction": p}


def test_a_prediction_beside_the_measured_runs(tmp_path, capsys):
    store = tmp_path / "s.jsonl"
    records = [run("native", t, i, f"n{i}") for i, t in enumerate((1.0, 1.2, 1.1))]
    records += [run("2vm-2vswitch", t, i, f"v{i}") for i, t in enumerate((1.3, 1.5))]
    records += [prediction(0.22), {**run("native", 0, 0, "cal"), "kernel": "calibration", "metrics": {},
                                   "calibration": {"topology": "native"}}]
    store.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["report", "--store", str(store), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    [row] = out["predictions"]
    assert row["predicted_overhead_pct"] == pytest.approx(20.0)  # 0.22 s over native's median 1.1 s
    assert row["measured_overhead_pct"] == pytest.approx(100 * (1.4 / 1.1 - 1))
    assert row["error_pp"] == pytest.approx(20.0 - 100 * (1.4 / 1.1 - 1))
    assert row["predicted_elapsed_s"] == pytest.approx(1.32) and row["measured_elapsed_s"] == pytest.approx(1.4)
    assert row["runs"] == [2, 3]
    assert {t["kernel"] for t in out["tables"]} == {"halo"}  # no table of calibrations or predictions
