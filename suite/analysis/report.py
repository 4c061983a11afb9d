"""Records laid out as documents: one row per record (``run``), one record's per-size table, and
the study-shaped summary of a store. Numbers come from tables.py and metrics.py, text from
format.py; a printed format (formats/) writes a document out.

The study's modules (tables, breakdown) are imported by the study's functions alone: ``run`` lays out its
records after every job, and their imports would add to what every run costs.
"""

from __future__ import annotations

from . import format as fmt
from . import formats
from . import metrics as registry
from .render import Document, Grid

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (2.5 ms of every run's end)
if TYPE_CHECKING:
    from .tables import StudyTable


def records_document(records: list[dict]) -> Document:
    """Column names and one row per record (kernels with different metrics get their own columns)."""
    columns = ["kernel", "topology", "ranks", "rep", "status"]
    body = []
    for record in records:
        summary = registry.headline_of(record)
        for name, _ in summary:
            if name not in columns:
                columns.append(name)
        body.append({"kernel": record["kernel"], "topology": record["topology"].get("name"),
                     "ranks": record["ranks"], "rep": record["repetition"] + 1, "status": record["status"],
                     **dict(summary)})
    raw = [[row.get(column) for column in columns] for row in body]
    text = [[fmt.number(value) for value in row] for row in raw]
    return Document([Grid(columns, text)], csv_rows=[columns, *raw], data=records)


def render_records(records: list[dict], form: str = "table") -> str:
    return formats.render(form, records_document(records))


def sizes_document(records: list[dict]) -> Document:
    """Each record's per-size table (bytes, latency, bandwidth, spread where measured), one grid per record."""
    grids, data, rows_csv = [], [], None
    for record in records:
        rows = registry.size_rows_of(record)
        if not rows:
            continue
        headers = list(rows[0])
        title = (f"{record['kernel']} x{record['ranks']} on {record['topology'].get('name')}, "
                 f"repetition {record['repetition'] + 1} ({record['run_id']})")
        grids.append(Grid(headers, [[fmt.number(row.get(h)) for h in headers] for row in rows], title))
        data.append({"run_id": record["run_id"], "repetition": record["repetition"], "kernel": record["kernel"],
                     "sizes": rows})
        if rows_csv is None:
            rows_csv = [["run_id", "repetition", *headers]]
        rows_csv += [[record["run_id"], record["repetition"], *(row.get(h) for h in headers)] for row in rows]
    return Document(grids, csv_rows=rows_csv or [], data=data)


# --- the study-shaped summary of a store -------------------------------------------------

LEGEND = {
    "cell": "median over repetitions, +-half the range as % of the median, xN repetitions; "
            "[k failed]: runs that did not pass, not counted",
    "overhead": "how much worse than the baseline topology at the same rank count, in % "
                "(time: slower; bandwidth: lower); negative is better; N/A: one side had more ranks "
                "than cpus (a VM's vCPUs), so it would measure the sharing, not the topology, or ran on an "
                "emulated CPU (QEMU's TCG), whose time is no hypervisor's",
    "cv": "coefficient of variation (stdev / mean) of the repetitions; * above 10%: too noisy to trust",
    "*": "noisy: the cell's repetitions vary (cv above 10%) or other work used more than 5% of the machine's "
         "cpus during one of its runs; an overhead or scaling step marked * is computed from such a cell",
    "scaling": "a->b: speedup from a to b ranks (time a / time b; bandwidth b / bandwidth a) "
               "and parallel efficiency = speedup / (b / a)",
}


def render_study(tables: list[StudyTable], form: str = "table", **context) -> str:
    """The summary of a store in ``form``; ``context`` (store, baseline, counts) goes into json and headers."""
    return formats.render(form, study_document(tables, context))


def _cell_text(cell) -> str:
    if cell is None:
        return "-"
    failed = sum(cell.failed.values())
    tail = f" [{failed} failed]" if failed else ""
    if cell.summary is None:
        return tail.strip() or "-"
    return f"{fmt.summary(cell.summary)}{' *' if cell.noise else ''}{tail}"


def _cv_text(cell) -> str:
    if cell is None or cell.summary is None:
        return "-"
    if cell.summary.cv is None:
        return f"n={cell.summary.n}"
    return f"{fmt.pct(cell.summary.cv * 100)}{'*' if cell.summary.noisy else ''}"


def _overhead_text(cell) -> str:
    if cell is not None and cell.overhead_na:
        return "N/A"
    if cell is None:
        return "-"
    return fmt.signed_pct(cell.overhead_pct) + (" *" if cell.derived_from and cell.overhead_pct is not None else "")


def study_grid(table: StudyTable) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of one study table as text: values, overhead, cv, scaling side by side."""
    ranks = table.rank_counts
    steps = list(dict.fromkeys((s.from_ranks, s.to_ranks) for row in table.rows for s in row.scaling))
    headers = (["topology"] + [f"{n} rank{'s' if n != 1 else ''}" for n in ranks] + [f"overhead {n}" for n in ranks]
               + [f"cv {n}" for n in ranks] + [f"{a}->{b}" for a, b in steps])
    body = []
    for row in table.rows:
        cells = [row.cells.get(n) for n in ranks]
        if row.label == table.baseline:
            overhead = ["base" if c and c.summary else "-" for c in cells]
        else:
            overhead = [_overhead_text(c) for c in cells]
        by_step = {(s.from_ranks, s.to_ranks): s for s in row.scaling}
        scaling = [fmt.scaling(by_step[k].speedup, by_step[k].efficiency) + (" *" if by_step[k].derived_from else "")
                   if k in by_step else "-" for k in steps]
        body.append([row.label, *map(_cell_text, cells), *overhead, *map(_cv_text, cells), *scaling])
    return headers, body


def notes(table: StudyTable, context: dict) -> list[str]:
    out = []
    if table.baseline is None and context.get("baseline"):
        out.append(f"no runs on the baseline topology {context['baseline']!r} here: no overhead")
    for row in table.rows:
        for ranks, cell in sorted(row.cells.items()):
            if cell.overhead_na:
                out.append(f"overhead N/A for {row.label} x{ranks}: {cell.overhead_na}")
            if cell.loaded:
                out.append(f"under load: {row.label} x{ranks}: {cell.loaded}")
            if cell.derived_from and cell.overhead_pct is not None:
                out.append(f"overhead of {row.label} x{ranks} computed from a noisy cell: {cell.derived_from}")
    return out


def _header_lines(context: dict) -> list[str]:
    lines = []
    if context.get("store"):
        lines.append(f"store {context['store']}: {context.get('records', 0)} record(s), "
                     f"{context.get('not_ok', 0)} not ok (not measured), baseline {context.get('baseline')}")
    lines += [f"no passing run: {item}" for item in context.get("unmeasured", [])]
    lines += [f"metrics not numbers (left out): {item}" for item in context.get("not_numbers", [])]
    lines += [f"VMs not confined by cgroups: {item}" for item in context.get("unconfined", [])]
    return lines


def prediction_grids(rows: list[dict]) -> list[Grid]:
    """``vnetbench predict``'s predictions beside the runs they predict (vnetbench.analysis.predictions)."""
    if not rows:
        return []
    headers = ["program", "ranks", "topology", "vs", "predicted %", "measured %", "error pp", "predicted s",
               "measured s", "error %", "runs"]
    body = [[row["program"] + (" (extrapolated)" if row["extrapolated"] else ""), str(row["ranks"]), row["topology"],
             row["baseline"], fmt.number(row["predicted_overhead_pct"]), fmt.number(row["measured_overhead_pct"]),
             fmt.number(row["error_pp"]), fmt.number(row["predicted_elapsed_s"]),
             fmt.number(row["measured_elapsed_s"]), fmt.number(row["error_pct"]), "/".join(map(str, row["runs"]))]
            for row in rows]
    return [Grid(headers, body, "predicted (vnetbench predict) beside measured: overhead and elapsed_s, medians")]


def breakdown_grids(rows: list[dict]) -> list[Grid]:
    """One grid per breakdown title: configuration columns, then the kernel's own."""
    from .breakdown import memory_label

    grids = {}
    for row in rows:
        columns = list(row["columns"])
        grid = grids.setdefault(row["title"], Grid(["topology", "ranks", "memory", *columns], [], row["title"]))
        grid.rows.append([row["topology"], str(row["ranks"]), memory_label(row["run_options"]),
                          *(fmt.value(row["columns"][c]) for c in columns)])
    return list(grids.values())


CSV_COLUMNS = ["kernel", "params", "metric", "unit", "better", "topology", "bind", "ranks", "n", "median", "mean",
               "min", "max", "stdev", "cv_pct", "noisy", "spread_pct", "overhead_pct", "scaling_from_ranks",
               "speedup", "efficiency", "failed", "overhead_na", "under_load", "overhead_from_noisy"]


def _csv_rows(tables: list[StudyTable]) -> list[list]:
    out = [CSV_COLUMNS]
    for table in tables:
        for row in table.rows:
            into = {s.to_ranks: s for s in row.scaling}
            for ranks in table.rank_counts:
                cell = row.cells.get(ranks)
                if cell is None:
                    continue
                s, step = cell.summary, into.get(ranks)
                out.append([table.kernel, table.params_label, table.metric.name, table.metric.unit,
                            table.metric.better, row.topology, row.bind or "", ranks, s.n if s else 0,
                            *(getattr(s, f) if s else None for f in ("median", "mean", "min", "max", "stdev")),
                            None if not s or s.cv is None else s.cv * 100, bool(cell.noise) if s else None,
                            s.spread_pct if s else None, cell.overhead_pct,
                            step.from_ranks if step else None, step.speedup if step else None,
                            step.efficiency if step else None, sum(cell.failed.values()), cell.overhead_na or "",
                            cell.loaded or "", cell.derived_from or ""])
    return out


def study_document(tables: list[StudyTable], context: dict) -> Document:
    from .tables import to_json

    grids = []
    for table in tables:
        headers, body = study_grid(table)
        grids.append(Grid(headers, body, table.title(), notes(table, context)))
    grids += breakdown_grids(context.get("breakdowns") or [])
    grids += prediction_grids(context.get("predictions") or [])
    if context.get("profiles"):
        from vnetbench.profile.view import grid_rows

        headers, body = grid_rows(context["profiles"])
        grids.append(Grid(headers, body, "MPI profiles (--profile; the last 20 profiled runs)"))
    return Document(grids, before=_header_lines(context), legend=LEGEND, csv_rows=_csv_rows(tables),
                    data=to_json(tables, **context, legend=LEGEND))
