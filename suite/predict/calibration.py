"""Calibrating a topology: its paths measured with the pingpong and allreduce kernels, stored as one record.

``calibrate(ref)`` brings the topology up once (through the one loop that brings topologies up for runs,
``engine.loop.run_all``, as ``run`` and ``sweep`` do) and, with the engine's own runs of the kernels:

- for each path the topology has from rank 0 (``paths.representatives``: the smallest rank count whose last
  rank reaches rank 0 over it), pingpong between rank 0 and that rank: the median half round trip, the
  windowed bandwidth and the bidirectional bandwidth (both ranks' windows at once: what a path's two ends can
  carry together, where their CPU, not the wire, is what limits it) at each size from 8 B to 1 MiB (powers of
  two), ``repeat`` times, the median of each;
- allreduce at 2 ranks and, with more VMs than 2, at one rank per VM: its time by size, the median over the
  repetitions, with the slowest path between its ranks.

The record (``kernel: calibration``) holds them under ``calibration`` with the topology's ``spec_hash`` (its
resolved spec: VMs, switches with their kinds and datapaths, uplink rates and delays, placement) and the MPI the
kernels loaded. ``find`` answers the fresh calibration of a topology, or why there is none (``stale``: a
calibration of a topology of that name whose spec has changed since, or whose spec file was changed after it).
"""

import datetime
import hashlib
import json
import statistics
import sys
import time
from pathlib import Path

from vnetbench.core.errors import UsageError
from vnetbench.core.records import make_record

from . import paths

KERNEL = "calibration"
# few sizes, few repetitions: a 2-VM topology's calibration takes seconds (benchmarks/predict.py times it)
PINGPONG = {"min_size": 8, "max_size": 1 << 20, "iterations": 300, "warmup": 30, "large_iterations": 20,
            "large_warmup": 2, "window": 64, "large_window": 8, "bw_iterations": 20, "bidirectional": True}
ALLREDUCE = {"min_size": 8, "max_size": 1 << 20, "iterations": 200, "warmup": 20, "large_iterations": 10,
             "large_warmup": 2}


def spec_hash(topology) -> str:
    """The hash of ``topology``'s resolved spec, as its records carry it (``to_dict``)."""
    return _hash(topology.to_dict())


def calibrate(topology, *, repeat: int = 1, mpi: str | None = None, echo=sys.stderr) -> dict:
    """Measure ``topology`` (loaded) and return its calibration record (not stored)."""
    from vnetbench.analysis.records import mpi_of
    from vnetbench.engine.loop import Plan, PlannedRun, run_all
    from vnetbench.mpi import selection as mpiselect
    from vnetbench.workloads.kernel import KernelWorkload

    wanted = paths.representatives(topology)
    counts = sorted({2, max(2, len(getattr(topology, "vms", None) or ()))})
    began = time.monotonic()
    problems, tables, allreduce = [], {}, {}
    pingpong, reduce = KernelWorkload("pingpong", PINGPONG), KernelWorkload("allreduce", ALLREDUCE)
    # every kernel run on the topology brought up once, by the one loop that brings topologies up for runs
    plan = Plan(pingpong, repeat, launcher=mpiselect.choose(mpi, pingpong.program)[0], echo=echo)
    plan.topologies[topology.name] = topology
    asked = [(key, PlannedRun(topology.name, ranks, rep, None, workload=pingpong))
             for key, (ranks, _) in wanted.items() for rep in range(repeat)]
    asked += [(ranks, PlannedRun(topology.name, ranks, rep, None, workload=reduce))
              for ranks in counts for rep in range(repeat)]
    plan.jobs = [job for _, job in asked]
    runs = run_all(plan, None, strict=True)  # strict: a record each job, in the plan's order
    done = {}
    for (what, _), record in zip(asked, runs):
        done.setdefault(what, []).append(record)
    for key, (ranks, path) in wanted.items():
        table = _pingpong_table(done.get(key, []), problems)
        if table:
            tables[key] = {"describe": path.describe(), "ranks": ranks, "pair": [0, ranks - 1],
                           "sizes": table, **({"rate_bps": path.rate, "delay_us": path.delay_us or 0}
                                              if path.kind == "uplink" else {})}
    for ranks in counts:
        table = _allreduce_table(done.get(ranks, []), problems)
        if table:
            worst = max(paths.classify(topology, ranks).values(), key=lambda p: ("host", "vm", "switch",
                                                                                   "uplink").index(p.kind))
            allreduce[str(ranks)] = {"path": worst.key, "sizes": table}
    described = runs[-1]["topology"] if runs else {"name": topology.name}
    passed = bool(tables) and not problems
    last = max((r for r in runs if r["status"] == "ok"), key=lambda r: r["ranks"], default=None)
    calibration = {"topology": topology.name, "source": getattr(topology, "source", None),
                   "spec_hash": spec_hash(topology), "mpi": mpi_of(last) if last else None,
                   "paths": tables, "allreduce": allreduce, "runs": [r["run_id"] for r in runs],
                   "repeat": repeat, "seconds": round(time.monotonic() - began, 3)}
    detail = (f"{len(tables)} path(s), allreduce at {', '.join(allreduce) or 'no'} ranks, {len(runs)} runs"
              if passed else "; ".join(problems) or "nothing measured")
    return make_record(kernel=KERNEL, params={"repeat": repeat, "pingpong": PINGPONG, "allreduce": ALLREDUCE},
                       ranks=last["ranks"] if last else 2, metrics=_headline(tables),
                       validation={"passed": passed, "detail": detail},
                       placement=last["placement"] if last else [], environment=last["environment"] if last else {},
                       topology=described, status=None if passed else "failed", calibration=calibration)


def _median_rows(records: list[dict], fields: tuple[str, ...]) -> list[dict]:
    by_size: dict[int, dict[str, list[float]]] = {}
    for record in records:
        for row in record["metrics"].get("sizes", []):
            slot = by_size.setdefault(row["bytes"], {f: [] for f in fields})
            for f in fields:
                if isinstance(row.get(f), (int, float)):
                    slot[f].append(row[f])
    return [{"bytes": size, **{f: statistics.median(v) for f, v in slot.items() if v}}
            for size, slot in sorted(by_size.items())]


def _ok(records: list[dict], problems: list[str]) -> list[dict]:
    bad = [r for r in records if r["status"] != "ok"]
    for r in bad:
        problems.append(f"{r['kernel']} x{r['ranks']}: {r['status']}: {r['validation'].get('detail', '')[:200]}")
    return [r for r in records if r["status"] == "ok"]


def _pingpong_table(records, problems) -> list[dict]:
    rows = _median_rows(_ok(records, problems), ("latency_p50_us", "bandwidth_mbps", "bibw_mbps"))
    return [{"bytes": r["bytes"], "oneway_us": r["latency_p50_us"], "bandwidth_mbps": r["bandwidth_mbps"],
             **({"bibw_mbps": r["bibw_mbps"]} if "bibw_mbps" in r else {})}
            for r in rows if "latency_p50_us" in r and "bandwidth_mbps" in r]


def _allreduce_table(records, problems) -> list[dict]:
    rows = _median_rows(_ok(records, problems), ("avg_us",))
    return [{"bytes": r["bytes"], "us": r["avg_us"]} for r in rows if "avg_us" in r]


def _headline(tables: dict) -> dict:
    """A flat summary per path: 8-byte one-way latency (us) and the largest size's bandwidth (MB/s)."""
    out = {}
    for key, table in tables.items():
        out[f"{key} latency_us@8B"] = table["sizes"][0]["oneway_us"]
        out[f"{key} MB/s@{table['sizes'][-1]['bytes']}B"] = table["sizes"][-1]["bandwidth_mbps"]
    return out


# ---- finding one -----------------------------------------------------------------------

def is_calibration(record: dict) -> bool:
    return record.get("kernel") == KERNEL and isinstance(record.get("calibration"), dict)


def _started(record: dict) -> float:
    try:
        return datetime.datetime.fromisoformat(record["started_at"]).timestamp()
    except (KeyError, ValueError):
        return 0.0


def freshness(record: dict, topology) -> str | None:
    """None when ``record`` calibrates ``topology`` as it is now; else why it does not."""
    cal = record["calibration"]
    if cal.get("spec_hash") != spec_hash(topology):
        return f"its spec has changed since (calibration {record['run_id']} of {record['started_at'][:19]})"
    source = getattr(topology, "source", None)
    if isinstance(source, str) and Path(source).is_file() and Path(source).stat().st_mtime > _started(record):
        return f"{source} was changed after calibration {record['run_id']} ({record['started_at'][:19]})"
    return None


def find_calibration(records: list[dict], topology, mpi: str | None = None) -> tuple[dict | None, str | None]:
    """(the newest fresh calibration of ``topology`` whose MPI is ``mpi`` (None: any), None); else (None, why not):
    None when there is no calibration of a topology of that name at all, a sentence when there are only stale
    ones (another spec, a spec file changed since, another MPI)."""
    same = [r for r in records if is_calibration(r) and r["status"] == "ok"
            and r["calibration"].get("topology") == topology.name]
    stale = None
    for record in sorted(same, key=_started, reverse=True):
        why = freshness(record, topology)
        if why:
            stale = stale or f"the calibration of {topology.name} is stale: {why}"
            continue
        other = record["calibration"].get("mpi")
        if mpi and other and _flavour(other) != _flavour(mpi):
            stale = stale or f"the calibration of {topology.name} was made with {other}, not {mpi}"
            continue
        return record, None
    return None, stale


def _flavour(mpi: str) -> str:
    """'Open MPI 5.0.7' -> 'open mpi 5.0.7'; what two MPIs must share for one's calibration to serve the other."""
    return mpi.strip().lower()


def usable(records: list[dict], mpi: str | None, exclude: str | None = None) -> list[dict]:
    """Every calibration in ``records`` fresh for the topology it names (loaded again when it is a preset or a file
    that still exists; else the spec the calibration recorded), with MPI ``mpi``; newest first; for extrapolation."""
    from vnetbench import topologies

    out, seen = [], set()
    for record in sorted((r for r in records if is_calibration(r) and r["status"] == "ok"), key=_started,
                         reverse=True):
        cal = record["calibration"]
        if cal.get("topology") in seen or cal.get("topology") == exclude:
            continue
        if mpi and cal.get("mpi") and _flavour(cal["mpi"]) != _flavour(mpi):
            continue
        try:
            now = topologies.load(_ref(cal))
        except (UsageError, OSError):  # its file is gone: the spec it recorded is what it describes
            spec = (record.get("topology") or {}).get("spec")
            if isinstance(spec, dict) and _hash(spec) == cal.get("spec_hash"):
                seen.add(cal["topology"])
                out.append(record)
            continue
        if freshness(record, now) is None:
            seen.add(cal["topology"])
            out.append(record)
    return out


def _hash(spec: dict) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def _ref(cal: dict) -> str:
    """What loads a calibration's topology again: its file, else its name (a preset or a twin)."""
    source = cal.get("source") or ""
    if source and Path(source).is_file():
        return source
    name = cal["topology"]
    from vnetbench.topologies.model.presets import PRESETS

    if name in PRESETS:
        return name
    from vnetbench.topologies import switches

    for kind in switches.names():
        if name.endswith(f"-{kind}") and name[:-len(kind) - 1] in PRESETS:
            return f"switch:{kind}:{name[:-len(kind) - 1]}"
    raise UsageError(f"calibration of {name}: its topology cannot be loaded again")
