"""One renderer per output format, for every document vnetbench prints (report, compare, run).

A document is data: lines before, titled grids of text cells with notes, lines after, a legend;
plus, for the machine formats, its csv rows and its json value. Builders (report.py, compare.py)
lay numbers out as text through format.py; this module only writes the document out.
"""

import csv
import io
import json
from dataclasses import dataclass, field


@dataclass
class Grid:
    headers: list[str]
    rows: list[list[str]]
    title: str = ""
    notes: list[str] = field(default_factory=list)


@dataclass
class Document:
    grids: list[Grid] = field(default_factory=list)
    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)
    legend: dict[str, str] = field(default_factory=dict)
    heading: str = ""  # markdown only: the document's title
    csv_rows: list[list] | None = None  # None: the csv of the first grid
    data: object = None  # the json form; None: the grids as objects


def text(doc: Document) -> str:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    buffer = io.StringIO()
    console = Console(file=buffer, width=200, no_color=True, highlight=False)
    for line in doc.before:
        console.print(line, markup=False, soft_wrap=True)
    for grid in doc.grids:
        if grid.title:
            console.print("")
            console.print(grid.title, markup=False)
        table = Table(*grid.headers)
        for row in grid.rows:
            table.add_row(*(Text(cell) for cell in row))
        console.print(table)
        for note in grid.notes:
            console.print(f"  note: {note}", markup=False, soft_wrap=True)
    for line in doc.after:
        console.print(line, markup=False, soft_wrap=True)
    if doc.legend:
        console.print("")
    for key, meaning in doc.legend.items():
        console.print(f"{key}: {meaning}", markup=False, soft_wrap=True)
    return buffer.getvalue().rstrip()


def _md_cell(cell: str) -> str:
    return cell.replace("|", "\\|")


def markdown(doc: Document) -> str:
    lines = [f"### {doc.heading}", ""] if doc.heading else []
    lines += [f"- {line}" if doc.heading else f"_{line}_" for line in doc.before]
    for grid in doc.grids:
        lines += ["", f"### {grid.title}", ""] if grid.title else [""]
        lines += ["| " + " | ".join(map(_md_cell, grid.headers)) + " |", "|" + "---|" * len(grid.headers)]
        lines += ["| " + " | ".join(map(_md_cell, row)) + " |" for row in grid.rows]
        lines += [f"\n_note: {note}_" for note in grid.notes]
    lines += [""] + [f"- {line}" for line in doc.after] if doc.after else []
    lines += [""] + [f"- **{key}**: {meaning}" for key, meaning in doc.legend.items()] if doc.legend else []
    return "\n".join(lines).strip()


def csv_text(doc: Document) -> str:
    rows = doc.csv_rows
    if rows is None:
        rows = [doc.grids[0].headers, *doc.grids[0].rows] if doc.grids else []
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue().rstrip()


def json_text(doc: Document) -> str:
    data = doc.data
    if data is None:
        data = [{"title": g.title, "headers": g.headers, "rows": g.rows, "notes": g.notes} for g in doc.grids]
    return json.dumps(data, indent=2, sort_keys=True)


def columns(headers: list[str], rows: list[list]) -> str:
    """Plain aligned columns with no rules, as ``ps`` and ``ip`` print them: for listings a person
    scans or a script splits on whitespace (topology list/show/status, hosts check/facts)."""
    rows = [[str(cell) for cell in row] for row in rows]
    widths = [max([len(str(h)), *(len(row[i]) for row in rows)]) for i, h in enumerate(headers)]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
                     for row in [list(map(str, headers)), *rows])


FORMATS = {"table": text, "markdown": markdown, "csv": csv_text, "json": json_text}


def render(doc: Document, fmt: str = "table") -> str:
    return FORMATS[fmt](doc)
