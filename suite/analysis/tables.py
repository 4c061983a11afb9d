"""The study's tables as data: per kernel and parameter set, topologies x rank counts, with derived numbers.

Each cell summarises the repetitions of one configuration (median, spread, coefficient of
variation); beside the cells: overhead against a baseline topology at the same rank count,
and speedup and parallel efficiency from one rank count to the next. Only runs with status
"ok" are measured; the others are counted per cell. A cell whose timing does not stand for its
topology (``timing_caveat``: ranks outnumbered the cpus they ran on, more ranks than a VM's vCPUs;
or the CPU was emulated, QEMU's TCG), or whose baseline cell's does not, is not compared with it:
its overhead is N/A, with the reason. A cell whose repetitions vary (cv above NOISY_CV) or ran beside
other work (launch.host_load above FOREIGN_LOAD) is marked noisy, and so is every overhead, speedup and
efficiency computed from it. Pure: records in, dataclasses out.
"""

from array import array
from collections import defaultdict
from dataclasses import dataclass, field

from ..kernels.contract import Metric
from . import metrics as registry
from .records import ConfigKey, bind_of, canonical, describe_key, mpi_of, run_options_of, topology_name
from .stats import FOREIGN_LOAD, Summary, summarise, worse_pct


@dataclass
class Cell:
    ranks: int
    summary: Summary | None
    values: list[float]
    failed: dict[str, int]
    overhead_pct: float | None = None
    caveat: str | None = None  # why its timing does not stand for its topology (timing_caveat), when it does not
    overhead_na: str | None = None  # why no overhead is given although both sides ran
    loaded: str | None = None  # how much other work ran beside its runs, when above FOREIGN_LOAD (under_load)
    derived_from: str | None = None  # the noisy cells its overhead was computed from, when any

    @property
    def noise(self) -> str | None:
        """Why its value is not to be trusted (a cv above NOISY_CV, other work beside its runs), or None."""
        said = [f"cv {self.summary.cv * 100:.0f}%"] if self.summary and self.summary.noisy else []
        return "; ".join(said + ([self.loaded] if self.loaded else [])) or None

    @property
    def oversubscribed(self) -> str | None:
        """Why its ranks outnumbered their cpus, when that is its caveat."""
        return self.caveat.removeprefix(OVERSUBSCRIBED) if self.caveat and self.caveat.startswith(OVERSUBSCRIBED) \
            else None

    def to_dict(self) -> dict:
        out = {"ranks": self.ranks, "values": self.values, "failed": self.failed, "overhead_pct": self.overhead_pct,
               "oversubscribed": self.oversubscribed, "caveat": self.caveat, "overhead_na": self.overhead_na,
               "under_load": self.loaded, "noise": self.noise, "overhead_from_noisy": self.derived_from}
        out.update(self.summary.to_dict() if self.summary else {"n": 0, "median": None, "cv_pct": None})
        return out


@dataclass
class Step:
    from_ranks: int
    to_ranks: int
    speedup: float
    efficiency: float
    derived_from: str | None = None  # the noisy cells it was computed from, when any

    def to_dict(self) -> dict:
        return {"from_ranks": self.from_ranks, "to_ranks": self.to_ranks, "speedup": self.speedup,
                "ideal_speedup": self.to_ranks / self.from_ranks, "efficiency": self.efficiency,
                "efficiency_pct": self.efficiency * 100, "from_noisy": self.derived_from}


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
    mpi: str | None = None  # the MPI library its runs loaded (records.mpi_of)

    def title(self) -> str:
        unit = f" ({self.metric.unit})" if self.metric.unit else ""
        setting = f" - {self.params_label}" if self.params_label else ""
        return f"{self.kernel}: {self.metric.label}{unit}, median of repetitions{setting}"

    def to_dict(self) -> dict:
        m = self.metric
        return {"kernel": self.kernel, "params": self.params, "run_options": self.run_options,
                "params_label": self.params_label, "mpi": self.mpi,
                "metric": {"name": m.name, "label": m.label, "unit": m.unit, "better": m.better},
                "baseline": self.baseline, "rank_counts": self.rank_counts,
                "rows": [{"topology": r.topology, "bind": r.bind, "label": r.label,
                          "cells": [r.cells[n].to_dict() for n in self.rank_counts if n in r.cells],
                          "scaling": [s.to_dict() for s in r.scaling]} for r in self.rows]}


class StudyTables:
    """The study's tables built a record at a time, keeping per configuration only what a cell shows:
    its table metrics' values, its failure counts, its first timing caveat; never the records.
    Memory follows configurations x repetitions, not the records' size.

    A kernel's table choice that leaves a metric out as more metrics appear never takes it back
    (a fixed list, or the smallest and largest message size), so the values of metrics it has
    left out are dropped as the store is read.
    """

    def __init__(self):
        self.groups: dict[tuple, _Group] = {}
        self.statuses: dict[ConfigKey, dict[str, int]] = {}  # every configuration's runs by status
        self.loose: dict[str, set[str]] = {}  # topology -> what did not confine its VMs (see unconfined)

    def unmeasured(self) -> list[str]:
        """Configurations that ran but never passed (so no cell shows them), as 'halo x4 on native: 2 timeout'."""
        return [f"{describe_key(key)}: {', '.join(f'{n} {s}' for s, n in sorted(seen.items()))}"
                for key, seen in self.statuses.items() if "ok" not in seen]

    def unconfined(self) -> list[str]:
        """Topologies whose VMs were not confined by cgroups in some passing run, as
        '2vm-1vswitch: vCPUs held by cpu affinity only; memory not limited' (a table cannot show it)."""
        return [f"{topology}: {'; '.join(sorted(what))}" for topology, what in self.loose.items()]

    def add(self, record: dict) -> None:
        kernel, params, options = record["kernel"], canonical(record["params"]), canonical(run_options_of(record))
        if record["status"] == "ok":
            loose = looseness(record)
            if loose:
                self.loose.setdefault(topology_name(record), set()).update(loose)
        # runs of different MPI libraries are never one cell: a table mixing Open MPI 4 and 5 would hide it
        mpi = mpi_of(record)
        group = self.groups.get((kernel, params, options, mpi))
        if group is None:
            group = self.groups[(kernel, params, options, mpi)] = _Group(kernel, record["params"],
                                                                         run_options_of(record), mpi)
        topology, bind = topology_name(record), bind_of(record)
        group.add(record, (topology, bind, record["ranks"]))
        key = ConfigKey(kernel, topology, record["ranks"], params, bind, options)
        self.statuses.setdefault(key, defaultdict(int))[record["status"]] += 1

    def build(self, baseline: str = "native") -> list[StudyTable]:
        """One table per kernel, parameter set and table metric, in the study's order."""
        order = sorted(self.groups, key=lambda key: registry.order(key[0]))
        tables = []
        for key in order:
            group = self.groups[key]
            siblings = [g.params for k, g in self.groups.items() if k[0] == key[0]]
            label = params_label(key[0], group.params, siblings)
            label = ", ".join(filter(None, [label, *(f"{k}={v}" for k, v in sorted(group.run_options.items()))]))
            if len({k[3] for k in self.groups if k[0] == key[0]}) > 1:  # the kernel ran on several MPIs
                label = ", ".join(filter(None, [label, f"MPI {group.mpi or 'unknown'}"]))
            tables += _tables_for(group, label, baseline)
        return tables


@dataclass
class _Slot:
    """The runs of one (topology, bind, ranks) in a group: a cell of each of its tables."""

    values: dict[str, array] = field(default_factory=dict)  # table metric -> values, in store order
    failed: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    over: dict[str, str] = field(default_factory=dict)  # table metric -> first timing caveat among its values
    loads: array = field(default_factory=lambda: array("d"))  # each passing run's foreign load share (-1: unknown)


@dataclass
class _Group:
    """One kernel, parameter set and run options: its metrics as described, its slots in store order."""

    kernel: str
    params: dict
    run_options: dict
    mpi: str | None = None  # the MPI library the runs loaded (records.mpi_of)
    described: dict[str, Metric] = field(default_factory=dict)
    slots: dict[tuple, _Slot] = field(default_factory=dict)
    chosen: list[str] = field(default_factory=list)  # the table metrics among those described so far
    seen: int = 0  # how many metrics were described when they were chosen

    def add(self, record: dict, key: tuple) -> None:
        slot = self.slots.get(key)
        if slot is None:
            slot = self.slots[key] = _Slot()
        if record["status"] != "ok":
            slot.failed[record["status"]] += 1
            return
        slot.loads.append(foreign_load(record))
        values = {}
        for metric, value in registry.extract(record):
            self.described[metric.name] = metric
            values[metric.name] = value
        if len(self.described) != self.seen:
            self._choose()
        crowded = None  # worked out once per record, and only while a cell has none yet
        for name in self.chosen:
            if name in values:
                slot.values.setdefault(name, array("d")).append(values[name])
                if name not in slot.over:
                    if crowded is None:
                        crowded = timing_caveat(record) or ""
                    if crowded:
                        slot.over[name] = crowded

    def _choose(self) -> None:
        self.chosen = registry.table_metrics(self.kernel, list(self.described))
        self.seen = len(self.described)
        for slot in self.slots.values():
            for name in [name for name in slot.values if name not in self.chosen]:
                del slot.values[name]
                slot.over.pop(name, None)


def build(records, baseline: str = "native") -> list[StudyTable]:
    """One table per kernel, parameter set and table metric, in the study's order."""
    study = StudyTables()
    for record in records:
        study.add(record)
    return study.build(baseline)


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


def _tables_for(group: _Group, label: str, baseline: str) -> list[StudyTable]:
    # a topology that ran several bindings at one rank count gets a row per binding
    binds = defaultdict(set)
    for topology, bind, ranks in group.slots:
        binds[(topology, ranks)].add(bind)
    split = {topology for (topology, _), seen in binds.items() if len(seen) > 1}

    def row_key(slot_key):
        return slot_key[0], slot_key[1] if slot_key[0] in split else None

    rank_counts = sorted({ranks for _, _, ranks in group.slots})
    row_order = list(dict.fromkeys(map(row_key, group.slots)))
    row_order.sort(key=lambda k: (k[0] != baseline, k[0], k[1] or ""))
    tables = []
    for name in registry.table_metrics(group.kernel, list(group.described)):
        metric = group.described[name]
        rows = {key: Row(*key) for key in row_order}
        for slot_key, slot in group.slots.items():
            found = list(slot.values.get(name, ()))
            ranks = slot_key[2]
            rows[row_key(slot_key)].cells[ranks] = Cell(ranks, summarise(found) if found else None, found,
                                                        dict(slot.failed), caveat=slot.over.get(name),
                                                        loaded=under_load(slot.loads))
        base = _baseline_rows(rows, baseline)
        for key, row in rows.items():
            reference = base.get(key[1], next(iter(base.values()), None))
            _overheads(row, reference, metric)
            if metric.scaling:
                row.scaling = _scaling(row, metric, rank_counts)
        first_base = next(iter(base.values()), None)
        tables.append(StudyTable(group.kernel, group.params, group.run_options, label, metric, rank_counts,
                                 list(rows.values()), first_base.label if first_base else None, group.mpi))
    return tables


def _baseline_rows(rows: dict, baseline: str) -> dict:
    return {key[1]: row for key, row in rows.items() if key[0] == baseline}


OVERSUBSCRIBED = "oversubscribed: "
EMULATED_CPU = "emulated CPU: not a hypervisor's timing"


def timing_caveat(record: dict) -> str | None:
    """Why the record's timing does not stand for its topology, or None: its CPU was emulated (QEMU's TCG: the
    guests ran, but no hypervisor's cost is in the time), or its ranks outnumbered their cpus (what it measured
    is the cpu sharing). A cell with a caveat, or whose baseline has one, shows its overhead as N/A."""
    if emulated_cpu(record):
        return EMULATED_CPU
    crowded = oversubscription(record)
    return OVERSUBSCRIBED + crowded if crowded else None


def emulated_cpu(record: dict) -> bool:
    """Did the record's ranks run on an emulated CPU (a qemu topology under TCG)?"""
    topology = record.get("topology")
    guest = topology.get("guest") if isinstance(topology, dict) else None
    launch = record.get("launch")
    notes = launch.get("notes") if isinstance(launch, dict) else None
    return (isinstance(guest, dict) and guest.get("accel") == "tcg") or \
        (isinstance(notes, dict) and notes.get("accel") == "tcg")


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


def foreign_load(record: dict) -> float:
    """The share of the machine's cpus other work used while the record's job ran (launch.host_load), -1 where
    the record does not say (older records, a host whose VMs could not be told from other work)."""
    launch = record.get("launch")
    load = launch.get("host_load") if isinstance(launch, dict) else None
    share = load.get("foreign_share") if isinstance(load, dict) else None
    return float(share) if isinstance(share, (int, float)) and not isinstance(share, bool) else -1.0


def under_load(shares) -> str | None:
    """How much other work ran beside a cell's runs, in words, when any run's share was above FOREIGN_LOAD."""
    over = [share for share in shares if share > FOREIGN_LOAD]
    if not over:
        return None
    return f"other work used {max(over) * 100:.0f}% of the cpus during {len(over)} of {len(shares)} run(s)"


def looseness(record: dict) -> list[str]:
    """What the netns backend could not confine a record's VMs with (its launch notes say what held
    the vCPUs and the memory: cgroups.enforcement); empty for confined VMs and for other backends."""
    launch = record.get("launch")
    notes = launch.get("notes") if isinstance(launch, dict) else None
    if not isinstance(notes, dict):
        return []
    out = []
    vcpus, memory = notes.get("vcpus_enforced_by"), notes.get("memory_limited_by")
    if isinstance(vcpus, str) and "cpuset" not in vcpus:
        out.append(f"vCPUs held by {vcpus} only")
    if memory == "none":
        out.append("memory not limited")
    return out


def _overheads(row: Row, reference: Row | None, metric: Metric) -> None:
    if reference is None:
        return
    for ranks, cell in row.cells.items():
        base = reference.cells.get(ranks)
        if not (cell.summary and base and base.summary):
            continue
        if row is not reference and (cell.caveat or base.caveat):
            # a crowded side measures the cpu sharing, an emulated one TCG: neither the topology
            cell.overhead_na = "; ".join(filter(None, [cell.caveat, base.caveat and f"{reference.label} {base.caveat}"]))
            continue
        cell.overhead_pct = worse_pct(base.summary.median, cell.summary.median, metric.better)
        if row is not reference:
            cell.derived_from = _noisy_sides((row.label, cell), (reference.label, base))


def _noisy_sides(*sides) -> str | None:
    """'native x2 (cv 79%)' for each of ``(label, cell)`` whose value is noisy; None when none is."""
    said = [f"{label} x{cell.ranks} ({cell.noise})" for label, cell in sides if cell.noise]
    return "; ".join(said) or None


def _scaling(row: Row, metric: Metric, rank_counts: list[int]) -> list[Step]:
    present = [n for n in rank_counts if n in row.cells and row.cells[n].summary and row.cells[n].summary.median]
    steps = []
    for low, high in zip(present, present[1:]):
        a, b = row.cells[low].summary.median, row.cells[high].summary.median
        speedup = a / b if metric.better == "lower" else b / a
        steps.append(Step(low, high, speedup, speedup / (high / low),
                          _noisy_sides((row.label, row.cells[low]), (row.label, row.cells[high]))))
    return steps


def to_json(tables: list[StudyTable], **context) -> dict:
    return {**context, "tables": [table.to_dict() for table in tables]}


def unmeasured(records) -> list[str]:
    """Configurations that ran but never passed (so no cell shows them), as 'halo x4 on native: 2 timeout'."""
    study = StudyTables()
    for record in records:
        study.add(record)
    return study.unmeasured()
