"""The study's tables as data: per kernel and parameter set, topologies x rank counts, with derived numbers.

Each cell summarises the repetitions of one configuration (median, spread, coefficient of
variation); beside the cells: overhead against a baseline topology at the same rank count,
and speedup and parallel efficiency from one rank count to the next. Only runs with status
"ok" are measured; the others are counted per cell. A cell whose ranks outnumbered the cpus
they ran on (more ranks than a VM's vCPUs), or whose baseline cell did, is not compared with
it: its overhead is N/A, with the reason. Pure: records in, dataclasses out.
"""

from collections import defaultdict
from dataclasses import dataclass, field

from ..kernels.contract import Metric
from . import metrics as registry
from .records import bind_of, canonical, config_key, describe_key, run_options_of, topology_name
from .stats import Summary, summarise, worse_pct


@dataclass
class Cell:
    ranks: int
    summary: Summary | None
    values: list[float]
    failed: dict[str, int]
    overhead_pct: float | None = None
    oversubscribed: str | None = None  # why its ranks outnumbered their cpus, when they did
    overhead_na: str | None = None  # why no overhead is given although both sides ran

    def to_dict(self) -> dict:
        out = {"ranks": self.ranks, "values": self.values, "failed": self.failed, "overhead_pct": self.overhead_pct,
               "oversubscribed": self.oversubscribed, "overhead_na": self.overhead_na}
        out.update(self.summary.to_dict() if self.summary else {"n": 0, "median": None, "cv_pct": None})
        return out


@dataclass
class Step:
    from_ranks: int
    to_ranks: int
    speedup: float
    efficiency: float

    def to_dict(self) -> dict:
        return {"from_ranks": self.from_ranks, "to_ranks": self.to_ranks, "speedup": self.speedup,
                "ideal_speedup": self.to_ranks / self.from_ranks, "efficiency": self.efficiency,
                "efficiency_pct": self.efficiency * 100}


@dataclass
class Row:
    topology: str
    bind: str | None  # set only when this topology ran with several bindings at one rank count
    cells: dict[int, Cell] = field(default_factory=dict)
    scaling: list[Step] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.topology} [bind {self.bind}]" if self.bind else self.topology


@dataclass
class StudyTable:
    kernel: str
    params: dict
    run_options: dict
    params_label: str
    metric: Metric
    rank_counts: list[int]
    rows: list[Row]
    baseline: str | None  # label of the baseline row, when there is one

    def title(self) -> str:
        unit = f" ({self.metric.unit})" if self.metric.unit else ""
        setting = f" - {self.params_label}" if self.params_label else ""
        return f"{self.kernel}: {self.metric.label}{unit}, median of repetitions{setting}"

    def to_dict(self) -> dict:
        m = self.metric
        return {"kernel": self.kernel, "params": self.params, "run_options": self.run_options,
                "params_label": self.params_label,
                "metric": {"name": m.name, "label": m.label, "unit": m.unit, "better": m.better},
                "baseline": self.baseline, "rank_counts": self.rank_counts,
                "rows": [{"topology": r.topology, "bind": r.bind, "label": r.label,
                          "cells": [r.cells[n].to_dict() for n in self.rank_counts if n in r.cells],
                          "scaling": [s.to_dict() for s in r.scaling]} for r in self.rows]}


def build(records: list[dict], baseline: str = "native") -> list[StudyTable]:
    """One table per kernel, parameter set and table metric, in the study's order."""
    groups = defaultdict(list)
    for record in records:
        groups[(record["kernel"], canonical(record["params"]), canonical(run_options_of(record)))].append(record)
    order = sorted(groups, key=lambda key: registry.order(key[0]))
    tables = []
    for key in order:
        group = groups[key]
        label = params_label(key[0], group[0]["params"], [g[0]["params"] for k, g in groups.items() if k[0] == key[0]])
        options = run_options_of(group[0])
        label = ", ".join(filter(None, [label, *(f"{k}={v}" for k, v in sorted(options.items()))]))
        tables += _tables_for(key[0], group, label, baseline)
    return tables


def params_label(kernel: str, params: dict, siblings: list[dict]) -> str:
    """The parameters that set this table apart: those off the kernel's defaults, else those that differ."""
    try:
        from .. import kernels

        reference = kernels.defaults(kernel)
    except Exception:  # a kernel this installation lacks: fall back to what differs between tables
        keys = {k for other in siblings for k in other}
        reference = {k: params.get(k) for k in keys if all(other.get(k) == params.get(k) for other in siblings)}
    changed = {k: v for k, v in sorted(params.items()) if k not in reference or reference[k] != v}
    return ", ".join(f"{k}={','.join(map(str, v)) if isinstance(v, (list, tuple)) else v}" for k, v in changed.items())


def _row_keys(group: list[dict]) -> dict[int, tuple]:
    """Row key per record: (topology, bind) where a topology ran several bindings at one rank count, else (topology, None)."""
    binds = defaultdict(set)
    for record in group:
        binds[(topology_name(record), record["ranks"])].add(bind_of(record))
    split = {topology for (topology, _), seen in binds.items() if len(seen) > 1}
    return {id(r): (topology_name(r), bind_of(r) if topology_name(r) in split else None) for r in group}


def _tables_for(kernel, group, label, baseline) -> list[StudyTable]:
    keys = _row_keys(group)
    described: dict[str, Metric] = {}
    for record in group:
        if record["status"] == "ok":
            described.update(registry.described(record))
    rank_counts = sorted({record["ranks"] for record in group})
    row_order = list(dict.fromkeys(keys[id(r)] for r in group))
    row_order.sort(key=lambda k: (k[0] != baseline, k[0], k[1] or ""))
    tables = []
    for name in registry.table_metrics(kernel, list(described)):
        metric = described[name]
        rows = {key: Row(*key) for key in row_order}
        cells = defaultdict(lambda: ([], defaultdict(int), []))
        for record in group:
            slot = cells[(keys[id(record)], record["ranks"])]
            if record["status"] != "ok":
                slot[1][record["status"]] += 1
                continue
            value = registry.values(record).get(name)
            if value is not None:
                slot[0].append(value)
                slot[2].append(oversubscription(record))
        for (key, ranks), (found, failed, over) in cells.items():
            rows[key].cells[ranks] = Cell(ranks, summarise(found) if found else None, found, dict(failed),
                                          oversubscribed=next(filter(None, over), None))
        base = _baseline_rows(rows, baseline)
        for key, row in rows.items():
            reference = base.get(key[1], next(iter(base.values()), None))
            _overheads(row, reference, metric)
            if metric.scaling:
                row.scaling = _scaling(row, metric, rank_counts)
        first_base = next(iter(base.values()), None)
        tables.append(StudyTable(kernel, group[0]["params"], run_options_of(group[0]), label, metric, rank_counts, list(rows.values()),
                                 first_base.label if first_base else None))
    return tables


def _baseline_rows(rows: dict, baseline: str) -> dict:
    return {key[1]: row for key, row in rows.items() if key[0] == baseline}


def oversubscription(record: dict) -> str | None:
    """Why the record's ranks outnumbered the cpus they ran on, or None when they did not.

    The per-rank placement is the realised truth (each rank's VM and that VM's vCPUs); the
    launcher's own note (``launch.notes.oversubscribed``, ranks against cores) covers runs
    without VMs. A record that says neither is taken as not oversubscribed.
    """
    per_vm, cpus = defaultdict(int), {}
    for place in record.get("placement") or []:
        if isinstance(place, dict) and isinstance(place.get("vm"), str) and isinstance(place.get("vm_cpus"), list):
            per_vm[place["vm"]] += 1
            cpus[place["vm"]] = len(place["vm_cpus"])
    crowded = [f"{n} ranks on {cpus[vm]} vCPU{'s' if cpus[vm] != 1 else ''} in VM {vm}"
               for vm, n in per_vm.items() if n > cpus[vm]]
    if crowded:
        return "; ".join(crowded)
    if per_vm:
        return None
    launch = record.get("launch")
    notes = launch.get("notes") if isinstance(launch, dict) else None
    if isinstance(notes, dict) and notes.get("oversubscribed") is True:
        cores = notes.get("cores")
        return f"{record['ranks']} ranks on {cores} cores" if isinstance(cores, int) else "ranks oversubscribed"
    return None


def _overheads(row: Row, reference: Row | None, metric: Metric) -> None:
    if reference is None:
        return
    for ranks, cell in row.cells.items():
        base = reference.cells.get(ranks)
        if not (cell.summary and base and base.summary):
            continue
        if row is not reference and (cell.oversubscribed or base.oversubscribed):
            # a crowded side measures the cpu sharing, not the topology
            cell.overhead_na = "; ".join(filter(None, [
                cell.oversubscribed and f"oversubscribed: {cell.oversubscribed}",
                base.oversubscribed and f"{reference.label} oversubscribed: {base.oversubscribed}"]))
            continue
        cell.overhead_pct = worse_pct(base.summary.median, cell.summary.median, metric.better)


def _scaling(row: Row, metric: Metric, rank_counts: list[int]) -> list[Step]:
    present = [n for n in rank_counts if n in row.cells and row.cells[n].summary and row.cells[n].summary.median]
    steps = []
    for low, high in zip(present, present[1:]):
        a, b = row.cells[low].summary.median, row.cells[high].summary.median
        speedup = a / b if metric.better == "lower" else b / a
        steps.append(Step(low, high, speedup, speedup / (high / low)))
    return steps


def to_json(tables: list[StudyTable], **context) -> dict:
    return {**context, "tables": [table.to_dict() for table in tables]}


def unmeasured(records: list[dict]) -> list[str]:
    """Configurations that ran but never passed (so no cell shows them), as 'halo x4 on native: 2 timeout'."""
    statuses = defaultdict(lambda: defaultdict(int))
    for record in records:
        statuses[config_key(record)][record["status"]] += 1
    return [f"{describe_key(key)}: {', '.join(f'{n} {s}' for s, n in sorted(seen.items()))}"
            for key, seen in statuses.items() if "ok" not in seen]
