"""Turning records into tables: the study-shaped summary of a store, and one row per record for ``run``.

Both come in table, markdown, csv and json form. The numbers come from ``summary``; this
module only lays them out.
"""

import csv
import io
import json

from . import breakdown
from .summary import StudyTable

# kernel -> function(record) -> list of (column, value) that summarise the run
HEADLINES = {}


def headline(kernel):
    def register(fn):
        HEADLINES[kernel] = fn
        return fn

    return register


@headline("stream")
def _stream(record):
    bw = record["metrics"].get("bandwidth_mbps", {})
    return [(f"{op} MB/s", bw.get(op)) for op in ("copy", "scale", "add", "triad")]


@headline("halo")
def _halo(record):
    metrics = record["metrics"]
    return [("elapsed s", metrics.get("elapsed_s")), ("step median ms", _scale(metrics.get("step_s", {}).get("median"), 1e3)),
            ("exchange s", metrics.get("exchange_s")), ("reduce s", metrics.get("reduce_s"))]


def _sizes(record):
    sizes = record["metrics"].get("sizes") or [{}]
    return sizes[0], sizes[-1]


@headline("pingpong")
def _pingpong(record):
    small, large = _sizes(record)
    return [(f"latency us @{small.get('bytes', '?')}B", small.get("latency_us")),
            (f"MB/s @{large.get('bytes', '?')}B", large.get("bandwidth_mbps"))]


@headline("allreduce")
def _allreduce(record):
    small, large = _sizes(record)
    return [(f"avg us @{small.get('bytes', '?')}B", small.get("avg_us")),
            (f"avg us @{large.get('bytes', '?')}B", large.get("avg_us"))]


def _scale(value, factor):
    return None if value is None else value * factor


def rows(records: list[dict]) -> tuple[list[str], list[list]]:
    """Column names and one row per record (kernels with different metrics get their own columns)."""
    columns = ["kernel", "topology", "ranks", "rep", "status"]
    body = []
    for record in records:
        has_metrics = bool(record["metrics"])
        summary = HEADLINES.get(record["kernel"], lambda r: [])(record) if has_metrics else []
        for name, _ in summary:
            if name not in columns:
                columns.append(name)
        values = {"kernel": record["kernel"], "topology": record["topology"].get("name"), "ranks": record["ranks"],
                  "rep": record["repetition"] + 1, "status": record["status"], **dict(summary)}
        body.append(values)
    return columns, [[row.get(column) for column in columns] for row in body]


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def render_records(records: list[dict], fmt: str = "table") -> str:
    return FORMATS[fmt](records)


def _table(records):
    from rich.console import Console
    from rich.table import Table

    columns, body = rows(records)
    table = Table(*columns, show_lines=False)
    for row in body:
        table.add_row(*(_fmt(value) for value in row))
    buffer = io.StringIO()
    Console(file=buffer, width=max(120, 14 * len(columns)), no_color=True).print(table)
    return buffer.getvalue().rstrip()


def _markdown(records):
    columns, body = rows(records)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_fmt(value) for value in row) + " |" for row in body]
    return "\n".join(lines)


def _csv(records):
    columns, body = rows(records)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(body)
    return buffer.getvalue().rstrip()


def _json(records):
    return json.dumps(records, indent=2, sort_keys=True)


FORMATS = {"table": _table, "markdown": _markdown, "csv": _csv, "json": _json}


# --- the study-shaped summary of a store -------------------------------------------------

LEGEND = {
    "cell": "median over repetitions, +-half the range as % of the median, xN repetitions; "
            "[k failed]: runs that did not pass, not counted",
    "overhead": "how much worse than the baseline topology at the same rank count, in % "
                "(time: slower; bandwidth: lower); negative is better",
    "cv": "coefficient of variation (stdev / mean) of the repetitions; * above 10%: too noisy to trust",
    "scaling": "a->b: speedup from a to b ranks (time a / time b; bandwidth b / bandwidth a) "
               "and parallel efficiency = speedup / (b / a)",
}


def render_study(tables: list[StudyTable], fmt: str = "table", **context) -> str:
    """The summary of a store in ``fmt``; ``context`` (store, baseline, counts) goes into json and headers."""
    return STUDY_FORMATS[fmt](tables, context)


def _number(value) -> str:
    if value is None:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def _cell_text(cell) -> str:
    if cell is None:
        return "-"
    failed = sum(cell.failed.values())
    tail = f" [{failed} failed]" if failed else ""
    s = cell.summary
    if s is None:
        return tail.strip() or "-"
    spread = f" +-{s.spread_pct:.1f}%" if s.n > 1 and s.spread_pct is not None else ""
    return f"{_number(s.median)}{spread} x{s.n}{' *' if s.noisy else ''}{tail}"


def _cv_text(cell) -> str:
    if cell is None or cell.summary is None:
        return "-"
    if cell.summary.cv is None:
        return f"n={cell.summary.n}"
    return f"{cell.summary.cv * 100:.1f}%{'*' if cell.summary.noisy else ''}"


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
            overhead = ["-" if c is None or c.overhead_pct is None else f"{c.overhead_pct:+.1f}%" for c in cells]
        by_step = {(s.from_ranks, s.to_ranks): s for s in row.scaling}
        scaling = [f"{by_step[k].speedup:.2f}x ({by_step[k].efficiency * 100:.0f}%)" if k in by_step else "-"
                   for k in steps]
        body.append([row.label, *map(_cell_text, cells), *overhead, *map(_cv_text, cells), *scaling])
    return headers, body


def _notes(table: StudyTable, context: dict) -> list[str]:
    notes = []
    if table.baseline is None and context.get("baseline"):
        notes.append(f"no runs on the baseline topology {context['baseline']!r} here: no overhead")
    return notes


def _header_lines(context: dict) -> list[str]:
    lines = []
    if context.get("store"):
        lines.append(f"store {context['store']}: {context.get('records', 0)} record(s), "
                     f"{context.get('not_ok', 0)} not ok (not measured), baseline {context.get('baseline')}")
    lines += [f"no passing run: {item}" for item in context.get("unmeasured", [])]
    return lines


def _study_table(tables, context):
    from rich.console import Console
    from rich.table import Table

    buffer = io.StringIO()
    console = Console(file=buffer, width=200, no_color=True, highlight=False)
    for line in _header_lines(context):
        console.print(line)
    for table in tables:
        headers, body = study_grid(table)
        grid = Table(*headers)
        for row in body:
            grid.add_row(*row)
        console.print("")
        console.print(table.title(), markup=False)
        console.print(grid, markup=False)
        for note in _notes(table, context):
            console.print(f"  note: {note}", markup=False)
    if context.get("stream_breakdown"):
        headers, body = breakdown.grid(context["stream_breakdown"])
        grid = Table(*headers)
        for row in body:
            grid.add_row(*row)
        console.print("")
        console.print(f"stream: {context['stream_breakdown'][0]['op']} per VM and per rank, median of repetitions",
                      markup=False)
        console.print(grid, markup=False)
    console.print("")
    for key, text in LEGEND.items():
        console.print(f"{key}: {text}", markup=False, soft_wrap=True)
    return buffer.getvalue().rstrip()


def _study_markdown(tables, context):
    lines = [f"_{line}_" for line in _header_lines(context)]
    for table in tables:
        headers, body = study_grid(table)
        lines += ["", f"### {table.title()}", "", "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(row) + " |" for row in body]
        lines += [f"\n_note: {note}_" for note in _notes(table, context)]
    if context.get("stream_breakdown"):
        headers, body = breakdown.grid(context["stream_breakdown"])
        lines += ["", f"### stream: {context['stream_breakdown'][0]['op']} per VM and per rank, median of repetitions",
                  "", "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(row) + " |" for row in body]
    lines += [""] + [f"- **{key}**: {text}" for key, text in LEGEND.items()]
    return "\n".join(lines).strip()


CSV_COLUMNS = ["kernel", "params", "metric", "unit", "better", "topology", "bind", "ranks", "n", "median", "mean",
               "min", "max", "stdev", "cv_pct", "noisy", "spread_pct", "overhead_pct", "scaling_from_ranks",
               "speedup", "efficiency", "failed"]


def _study_csv(tables, context):
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for table in tables:
        for row in table.rows:
            into = {s.to_ranks: s for s in row.scaling}
            for ranks in table.rank_counts:
                cell = row.cells.get(ranks)
                if cell is None:
                    continue
                s, step = cell.summary, into.get(ranks)
                writer.writerow([table.kernel, table.params_label, table.metric.name, table.metric.unit,
                                 table.metric.better, row.topology, row.bind or "", ranks, s.n if s else 0,
                                 *(getattr(s, f) if s else None for f in ("median", "mean", "min", "max", "stdev")),
                                 None if not s or s.cv is None else s.cv * 100, s.noisy if s else None,
                                 s.spread_pct if s else None, cell.overhead_pct,
                                 step.from_ranks if step else None, step.speedup if step else None,
                                 step.efficiency if step else None, sum(cell.failed.values())])
    return buffer.getvalue().rstrip()


def _study_json(tables, context):
    from .summary import to_json

    return json.dumps(to_json(tables, **context, legend=LEGEND), indent=2, sort_keys=True)


STUDY_FORMATS = {"table": _study_table, "markdown": _study_markdown, "csv": _study_csv, "json": _study_json}
