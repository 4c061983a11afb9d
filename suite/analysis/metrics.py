"""The numbers a record holds, as its kernel declares them (kernels/contract.py).

Everything else in the analysis layer sees a record only through this module: ``values(record)``
is a flat mapping from metric name to number, so a record whose metrics are malformed yields
fewer values, never an error. A kernel this vnetbench does not know (a record from a newer one)
gets the generic reading: its top-level numbers, direction unknown.
"""

import math
import sys

from ..kernels import KERNELS, find
from ..kernels.contract import Metric

_BROKEN = (TypeError, AttributeError, KeyError, ValueError, IndexError)


def finite(value) -> float | None:
    """``value`` as a finite float, or None (bools, strings, NaN and the like are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def workload(kernel: str):
    """The module declaring ``kernel``'s metrics, or None for a kernel this vnetbench lacks."""
    module = find(kernel) if isinstance(kernel, str) else None
    if module is None and isinstance(kernel, str):
        # an application seen in a record: ``_of`` imported the applications' package for it
        seen = sys.modules.get(f"{__package__.rpartition('.')[0]}.apps.workload")
        module = seen.known(kernel) if seen is not None else None
    return module if module is not None and hasattr(module, "metrics") else None


def _of(record: dict):
    """The workload of a record: an application's from its own declaration, else its kernel's."""
    if isinstance(record.get("app"), dict):  # only then: the applications' package costs start-up time
        from ..apps.workload import of_record

        found = of_record(record)
        if found is not None:
            return found
    return workload(record.get("kernel"))


def order(kernel: str) -> tuple[int, str]:
    """Sort key: registered kernels in registry order, then the others by name."""
    names = list(KERNELS)
    return (names.index(kernel), "") if kernel in names else (len(names), str(kernel))


def _generic(m):
    return [(Metric(key, key, "", None), value) for key, value in sorted(m.items()) if finite(value) is not None]


def _pairs(record: dict) -> list[tuple[Metric, object]]:
    m = record.get("metrics")
    if not isinstance(m, dict) or not m:
        return []
    module = _of(record)
    try:
        return list(module.metrics(m) if module else _generic(m))
    except _BROKEN:
        return []


def extract(record: dict) -> list[tuple[Metric, float]]:
    """Every well-formed metric of a record, with its value."""
    return [(metric, value) for metric, raw in _pairs(record) if (value := finite(raw)) is not None]


def values(record: dict) -> dict[str, float]:
    return {metric.name: value for metric, value in extract(record)}


def described(record: dict) -> dict[str, Metric]:
    return {metric.name: metric for metric, _ in extract(record)}


def not_numbers(record: dict) -> list[str]:
    """The declared metrics whose value in the record is there but not a finite number, as ``name=value``."""
    return [f"{metric.name}={raw!r}" for metric, raw in _pairs(record) if raw is not None and finite(raw) is None]


def table_metrics(kernel: str, names: list[str]) -> list[str]:
    """The metrics the study tables and plots show for ``kernel``, in order (headline first)."""
    module = workload(kernel)
    try:
        if module is not None:
            return [name for name in module.table(names) if name in names]
    except _BROKEN:
        pass
    return [name for name in names if "@" not in name][:2]


def headline_of(record: dict) -> list[tuple[str, object]]:
    """``[(column, value)]`` that ``run`` prints for one record."""
    m = record.get("metrics")
    if not isinstance(m, dict) or not m:
        return []
    module = _of(record)
    try:
        if module is not None:
            return list(module.headline(m))
    except _BROKEN:
        return []
    return [(metric.name, value) for metric, value in extract(record)[:4]]


def size_rows_of(record: dict) -> list[dict]:
    """The record's per-size table (``[{column: value}]``), when its kernel declares one."""
    m = record.get("metrics")
    module = _of(record)
    if not isinstance(m, dict) or module is None or not hasattr(module, "size_rows"):
        return []
    try:
        return list(module.size_rows(m))
    except _BROKEN:
        return []


def declares_breakdown(kernel: str) -> bool:
    module = workload(kernel)
    return module is not None and hasattr(module, "breakdown")


def breakdown(kernel: str, runs: list[dict]) -> tuple[str, dict] | None:
    """(title, columns) where the kernel's headline comes from for one configuration's passing runs."""
    if not declares_breakdown(kernel):
        return None
    module = workload(kernel)
    try:
        columns = module.breakdown(runs)
    except _BROKEN:
        return None
    title = module.BREAKDOWN_TITLE
    # the kernel's name once, whether or not its title starts with it (md's did: "md: md: time per phase")
    title = title if title.startswith(f"{kernel}: ") else f"{kernel}: {title}"
    return (title, columns) if columns else None


def series(record: dict, name: str) -> list[tuple[int, float]]:
    """(bytes, value) of the per-size metric series ``name`` in one record, sorted by size."""
    return sorted((metric.size, value) for metric, value in extract(record)
                  if metric.size is not None and metric.series == name)
