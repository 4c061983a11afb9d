"""The numbers a record holds, by kernel: each metric with its unit and which way is better.

Report and compare see a record only through ``values(record)``, a flat mapping from metric
name to number, so a record whose metrics are malformed yields fewer values, never an error.
Kernels register an extractor here; adding one is adding a function.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str  # stable key, e.g. "elapsed_s", "bandwidth_mbps.triad", "latency_us@8B"
    label: str  # for people: "elapsed", "triad bandwidth", "latency at 8 B"
    unit: str
    better: str | None  # "lower", "higher", or None when vnetbench does not know
    scaling: bool = False  # speedup and efficiency across rank counts mean something
    size: int | None = None  # message size in bytes, for per-size metrics


# kernel -> function(metrics dict) -> list of (Metric, raw value); values are checked afterwards
EXTRACTORS: dict[str, Callable[[dict], list]] = {}
# kernel -> function(metric names present) -> the names the study-shaped tables show, in order
TABLES: dict[str, Callable[[list[str]], list[str]]] = {}


def extractor(kernel):
    def register(fn):
        EXTRACTORS[kernel] = fn
        return fn

    return register


def number(value) -> float | None:
    """``value`` as a finite float, or None (bools, strings, NaN and the like are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def extract(record: dict) -> list[tuple[Metric, float]]:
    """Every well-formed metric of a record, with its value."""
    metrics = record.get("metrics")
    if not isinstance(metrics, dict) or not metrics:
        return []
    fn = EXTRACTORS.get(record.get("kernel"), _generic)
    try:
        pairs = fn(metrics)
    except (TypeError, AttributeError, KeyError, ValueError):
        return []
    return [(metric, value) for metric, raw in pairs if (value := number(raw)) is not None]


def values(record: dict) -> dict[str, float]:
    return {metric.name: value for metric, value in extract(record)}


def described(record: dict) -> dict[str, Metric]:
    return {metric.name: metric for metric, _ in extract(record)}


def table_metrics(kernel: str, names: list[str]) -> list[str]:
    chooser = TABLES.get(kernel)
    return chooser(names) if chooser else [name for name in names if "@" not in name][:2]


@extractor("halo")
def _halo(m):
    step = m.get("step_s") if isinstance(m.get("step_s"), dict) else {}
    return [(Metric("elapsed_s", "elapsed", "s", "lower", scaling=True), m.get("elapsed_s")),
            (Metric("step_s.median", "median step", "s", "lower"), step.get("median")),
            (Metric("compute_s", "compute", "s", "lower"), m.get("compute_s")),
            (Metric("exchange_s", "halo exchange", "s", "lower"), m.get("exchange_s")),
            (Metric("reduce_s", "reduction", "s", "lower"), m.get("reduce_s"))]


STREAM_OPS = ("copy", "scale", "add", "triad")


@extractor("stream")
def _stream(m):
    bw = m.get("bandwidth_mbps") if isinstance(m.get("bandwidth_mbps"), dict) else {}
    return [(Metric(f"bandwidth_mbps.{op}", f"{op} bandwidth", "MB/s", "higher", scaling=True), bw.get(op))
            for op in STREAM_OPS]


def _rows(m):
    rows = m.get("sizes")
    return [row for row in rows if isinstance(row, dict) and number(row.get("bytes"))] if isinstance(rows, list) else []


@extractor("pingpong")
def _pingpong(m):
    out = []
    for row in _rows(m):
        size = int(row["bytes"])
        out.append((Metric(f"latency_us@{size}B", f"latency at {size} B", "us", "lower", size=size),
                    row.get("latency_us")))
        out.append((Metric(f"bandwidth_mbps@{size}B", f"bandwidth at {size} B", "MB/s", "higher", size=size),
                    row.get("bandwidth_mbps")))
    return out


@extractor("allreduce")
def _allreduce(m):
    return [(Metric(f"avg_us@{int(row['bytes'])}B", f"allreduce at {int(row['bytes'])} B", "us", "lower",
                    size=int(row["bytes"])), row.get("avg_us")) for row in _rows(m)]


def _generic(m):
    # a kernel this vnetbench does not know: its top-level numbers, direction unknown
    return [(Metric(key, key, "", None), value) for key, value in sorted(m.items()) if number(value) is not None]


def _smallest_and_largest(prefix_small, prefix_large):
    def choose(names):
        def size(name):
            return int(name.rsplit("@", 1)[1][:-1])

        small = sorted((n for n in names if n.startswith(prefix_small + "@")), key=size)
        large = sorted((n for n in names if n.startswith(prefix_large + "@")), key=size)
        return [*small[:1], *large[-1:]]

    return choose


TABLES["halo"] = lambda names: [n for n in ("elapsed_s",) if n in names]
TABLES["stream"] = lambda names: [f"bandwidth_mbps.{op}" for op in ("triad", "copy", "scale", "add")
                                  if f"bandwidth_mbps.{op}" in names]
TABLES["pingpong"] = _smallest_and_largest("latency_us", "bandwidth_mbps")
TABLES["allreduce"] = _smallest_and_largest("avg_us", "avg_us")


def series(record: dict, field: str) -> list[tuple[int, float]]:
    """(bytes, value) for a per-size field of ``metrics.sizes`` (pingpong, allreduce), sorted by size."""
    metrics = record.get("metrics")
    if not isinstance(metrics, dict):
        return []
    out = []
    for row in _rows(metrics):
        value = number(row.get(field))
        if value is not None:
            out.append((int(row["bytes"]), value))
    return sorted(out)
