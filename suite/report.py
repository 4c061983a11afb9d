"""Turning records into tables: one row per record, in table, markdown, csv or json form."""

import csv
import io
import json

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
