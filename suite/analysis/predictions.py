"""Predictions in the store, and ``report``'s table of each prediction beside the runs it predicts.

``predict`` stores its answer as a record (``kernel: prediction``, the answer under ``prediction``). ``report``
collects, while it reads a store, each prediction and the elapsed times (``metrics.elapsed_s``) of the passing
runs of the same program at the same rank count on the predicted topology and on the profile's own; wherever a
prediction and both kinds of runs exist it shows the predicted overhead beside the measured one (medians), and the
predicted elapsed time (the baseline's measured median plus the predicted difference) beside the measured one.
"""

import statistics

from vnetbench.core.records import make_record

KERNEL = "prediction"


def workload_of(record: dict) -> str:
    """A record's program, as ``--program`` names it: a kernel's or an application's name, or an exec'd program's
    basename."""
    app = record.get("app")
    if isinstance(app, dict) and isinstance(app.get("argv"), list) and app["argv"] and record["kernel"] in (
            "exec", "program"):
        return str(app["argv"][0]).rsplit("/", 1)[-1]
    return record["kernel"]


def prediction_record(profile: dict, target, result: dict) -> dict:
    """The stored form of ``predict``'s ``result`` for ``profile``'s program on ``target``."""
    return make_record(kernel=KERNEL, params={"program": result["program"], "profile": result["profile"]},
                       ranks=result["ranks"], metrics={}, validation={"passed": True, "detail": "a prediction"},
                       placement=profile["placement"], environment={}, status="ok",
                       topology={"name": target.name, "backend": target.backend, "spec": target.to_dict()},
                       prediction={k: v for k, v in result.items() if k != "breakdown"})


def skipped(record: dict) -> bool:
    """Records that are not runs of a workload: calibrations and predictions (the study's tables leave them out)."""
    return record.get("kernel") in (KERNEL, "calibration") and (
        isinstance(record.get("prediction"), dict) or isinstance(record.get("calibration"), dict))


class Predictions:
    """Filled record by record (``add``); ``rows()``: each latest prediction with the runs both sides measured."""

    def __init__(self):
        self.latest: dict[tuple, dict] = {}
        self.times: dict[tuple, list[float]] = {}

    def add(self, record: dict) -> None:

        if record.get("kernel") == KERNEL and isinstance(record.get("prediction"), dict):
            p = record["prediction"]
            self.latest[(p["program"], p["ranks"], p["topology"], p["baseline_topology"])] = p
            return
        if skipped(record) or record["status"] != "ok":
            return
        elapsed = record["metrics"].get("elapsed_s")
        if isinstance(elapsed, (int, float)) and not isinstance(elapsed, bool) and elapsed > 0:
            key = (workload_of(record), record["ranks"], record["topology"].get("name"))
            self.times.setdefault(key, []).append(float(elapsed))

    def rows(self) -> list[dict]:
        out = []
        for (program, ranks, topology, baseline), p in sorted(self.latest.items()):
            there, here = self.times.get((program, ranks, topology)), self.times.get((program, ranks, baseline))
            if not there or not here:
                continue
            measured_t, measured_b = statistics.median(there), statistics.median(here)
            predicted_pct = 100.0 * p["delta_s"] / measured_b  # against the same elapsed time the runs measure
            measured_pct = 100.0 * (measured_t / measured_b - 1.0)
            predicted_s = measured_b + p["delta_s"]
            out.append({"program": program, "ranks": ranks, "topology": topology, "baseline": baseline,
                        "predicted_overhead_pct": predicted_pct, "measured_overhead_pct": measured_pct,
                        "error_pp": predicted_pct - measured_pct,
                        "predicted_elapsed_s": predicted_s, "measured_elapsed_s": measured_t,
                        "error_pct": 100.0 * (predicted_s / measured_t - 1.0), "runs": [len(there), len(here)],
                        "extrapolated": p.get("extrapolated", False), "profile": p["profile"]})
        return out
