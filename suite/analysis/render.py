"""What vnetbench prints, as data: a document, and plain aligned columns for listings.

A document is lines before, titled grids of text cells with notes, lines after, a legend; plus, for the
machine formats, its csv rows and its json value. Builders (report.py, compare.py) lay numbers out as
text through format.py; the printed formats (formats/) write a document out.
"""

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


def columns(headers: list[str], rows: list[list]) -> str:
    """Plain aligned columns with no rules, as ``ps`` and ``ip`` print them: for listings a person
    scans or a script splits on whitespace (topology list/show/status, hosts check/facts)."""
    rows = [[str(cell) for cell in row] for row in rows]
    widths = [max([len(str(h)), *(len(row[i]) for row in rows)]) for i, h in enumerate(headers)]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
                     for row in [list(map(str, headers)), *rows])

