"""``predict``'s answer: a profiled run's trace replayed over its own topology's costs and over the target's.

The prediction is a difference: both replays use the same measured computation, so what they differ by is
what the two topologies' paths cost the program (``delta_s``). The predicted elapsed time on the target is the
profiled run's measured elapsed time plus that difference; the overhead is the difference over the measured
elapsed time. The replay of the profile's own topology against its measured elapsed time is the model's
self-consistency (``self_error_pct``): what the model misses of the program's own communication.
"""

from vnetbench.analysis.predictions import workload_of
from vnetbench.core.errors import SpecError, UsageError

from . import calibration, model, paths, replay


def profile_record(records: list[dict], run_id: str, store: str) -> dict:
    """The record of run ``run_id`` (``RUN_ID`` or ``RUN_ID:REPETITION``, 1-based) that has a trace; exit-2 errors
    naming why not."""
    ident, _, rep = run_id.partition(":")
    if run_id == "last":  # the store's latest run profiled with a trace
        traced = [r for r in records if isinstance(r.get("profile"), dict) and r["profile"].get("mode") == "trace"]
        if not traced:
            raise UsageError(f"--profile: no run in {store} was profiled with --profile trace")
        ident, rep = traced[-1]["run_id"], str(traced[-1]["repetition"] + 1)
    found = [r for r in records if r.get("run_id") == ident and not calibration.is_calibration(r)]
    if rep:
        found = [r for r in found if str(r["repetition"] + 1) == rep]
    if not found:
        raise UsageError(f"--profile: no run {run_id} in {store}")
    record = found[0]
    profile = record.get("profile")
    if not isinstance(profile, dict):
        raise UsageError(f"--profile: run {run_id} was not profiled; run it again with --profile trace")
    trace = profile.get("trace")
    if profile.get("mode") != "trace" or not isinstance(trace, dict):
        raise UsageError(f"--profile: run {run_id} has a profile summary but no trace; run it again with "
                         f"--profile trace")
    if trace.get("truncated"):
        raise UsageError(f"--profile: the trace of run {run_id} is truncated (its size cap was hit); profile a "
                         f"shorter run")
    if record["status"] != "ok":
        raise UsageError(f"--profile: run {run_id} did not pass ({record['status']}); profile a run that did")
    return record


def check_identity(record: dict, program: str | None, ranks: int | None) -> None:
    if program is not None and workload_of(record) != program:
        raise UsageError(f"--program: the profile {record['run_id']} is of {workload_of(record)}, not {program}")
    if ranks is not None and record["ranks"] != ranks:
        raise UsageError(f"--ranks: the profile {record['run_id']} ran {record['ranks']} ranks, not {ranks}")


def events_of(trace) -> tuple[list[list], list[float]]:
    """The trace's per-rank events (the reader's ``Event``s have ``replay.Event``'s fields) and each rank's elapsed
    seconds."""
    return [trace.events(rank) for rank in range(trace.ranks)], [float(e) for e in trace.elapsed]


def whole_trace(record: dict, store):
    """The trace of ``record``'s run (``profile.trace``); UsageError when it is truncated (its size cap was hit)."""
    from vnetbench.profile import trace as reader

    trace = reader.load_trace(record, store)
    if trace.truncated:
        raise UsageError(f"--profile: the trace of run {record['run_id']} is truncated (its size cap was hit); "
                         f"profile a shorter run")
    return trace


def base_topology(record: dict):
    """The profile's own topology, from its record's spec."""
    from vnetbench import topologies
    from vnetbench.topologies import base

    spec = record["topology"].get("spec")
    if not isinstance(spec, dict) or spec.get("backend") not in base.names():
        raise UsageError(f"--profile: run {record['run_id']}'s record does not say its topology's spec")
    if spec.get("backend") == "local" and set(spec) <= {"version", "name", "description", "backend", "placement"}:
        from vnetbench.topologies.local import NativeTopology

        return NativeTopology(spec)
    source = f"the topology of run {record['run_id']}"
    try:
        return topologies.backend(spec["backend"]).from_data(dict(spec), source)
    except SpecError:  # sized for another host: its paths are what matters, read by the spec model alone
        from vnetbench.topologies.model import spec as model

        return model.from_dict(dict(spec), source)


def costs_for(topology, ranks: int, records: list[dict], mpi: str | None, what: str) -> model.Costs:
    """The costs of ``topology``: its own fresh calibration, else extrapolated from others; exit 2 when a calibration
    of it is stale, or nothing covers a path."""
    own, stale = calibration.find_calibration(records, topology, mpi)
    if stale:
        raise UsageError(f"{what}: {stale}; run vnetbench calibrate --topology {topology.name} again")
    others = calibration.usable(records, mpi, exclude=topology.name)
    try:
        return model.Costs(topology, ranks, own, others)
    except model.CalibrationError as exc:
        if own is None:
            raise UsageError(f"{what}: no calibration of {topology.name} (vnetbench calibrate --topology "
                             f"{topology.name}), and {str(exc).split(': ', 1)[1]}") from None
        raise


def predict(records: list[dict], record: dict, target, trace, *, mpi: str | None = None) -> dict:
    """The prediction for ``record``'s program (its ``trace``) on ``target`` (a loaded topology)."""
    from vnetbench.analysis.records import mpi_of

    mpi = mpi or mpi_of(record)
    ranks = trace.ranks
    if ranks != record["ranks"]:
        raise UsageError(f"--profile: the trace of run {record['run_id']} has {ranks} ranks, its record "
                         f"{record['ranks']}")
    base = base_topology(record)
    events, elapsed = events_of(trace)
    measured = max(elapsed)
    base_costs = costs_for(base, ranks, records, mpi, "--profile")
    target_costs = costs_for(target, ranks, records, mpi, "--topology")
    base_s, _, base_stats = replay.Replay(events, elapsed, base_costs).run()
    target_s, _, target_stats = replay.Replay(events, elapsed, target_costs).run()
    delta = target_s - base_s
    return {
        "program": workload_of(record), "profile": record["run_id"], "ranks": ranks,
        "topology": target.name, "baseline_topology": base.name,
        "elapsed_s": measured + delta, "baseline_elapsed_s": measured, "delta_s": delta,
        "overhead_pct": 100.0 * delta / measured if measured > 0 else None,
        "replay": {"topology_s": target_s, "baseline_s": base_s,
                   "self_error_pct": 100.0 * (base_s - measured) / measured if measured > 0 else None},
        "breakdown": _breakdown(target_costs, target_stats, base_stats, ranks),
        "paths": {key: {"describe": p.describe(), "how": target_costs.notes.get(key)}
                  for key, p in paths.kinds(target, ranks).items()},
        "rests_on": {"topology": target_costs.rests_on, "baseline": base_costs.rests_on},
        "extrapolated": target_costs.extrapolated,
        "baseline_extrapolated": base_costs.extrapolated,
        "mpi": mpi,
    }


def _breakdown(costs, stats, base_stats, ranks: int) -> dict:
    """Which calls, how many bytes, over which path, how much overlapped with computation - on the target, with
    each call's seconds on the baseline beside."""
    calls = {}
    for call, row in stats.calls.items():
        base = base_stats.calls.get(call, {})
        calls[call] = {"calls": row["calls"], "bytes": row["bytes"], "seconds": row["seconds"],
                       "baseline_seconds": base.get("seconds", 0.0)}
    by_path = {}
    for key, row in stats.paths.items():
        by_path[key] = {**row, "describe": paths_describe(costs, key)}
    return {"calls": calls, "paths": by_path, "compute_s_per_rank": stats.compute_s / max(ranks, 1)}


def paths_describe(costs, key: str) -> str:
    for path in costs.pairs.values():
        if path.key == key:
            return path.describe()
    return key
