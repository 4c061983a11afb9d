"""What vnetbench prints, as data: a document, and plain aligned columns for listings.

A document is lines before, titled grids of text cells with notes, lines after, a legend; plus, for the
machine formats, its csv rows and its json value. Builders (report.py, compare.py) lay numbers out as
text through format.py; the printed formats (formats/) write a document out.
"""


class Grid:
    """A titled grid of text cells, with notes under it. A plain class, not a dataclass: ``run`` prints one
    after every job (``vnetbench.cli`` says why)."""

    def __init__(self, headers: list[str], rows: list[list[str]], title: str = "", notes: list[str] | None = None):
        self.headers, self.rows, self.title = headers, rows, title
        self.notes = [] if notes is None else notes

    def __repr__(self) -> str:
        return f"Grid({vars(self)})"


class Document:
    """Grids with lines before and after them and a legend; ``heading``: the document's title (markdown only);
    ``csv_rows``: None for the csv of the first grid; ``data``: the json form, None for the grids as objects."""

    def __init__(self, grids: list[Grid] | None = None, before: list[str] | None = None,
                 after: list[str] | None = None, legend: dict[str, str] | None = None, heading: str = "",
                 csv_rows: list[list] | None = None, data: object = None):
        self.grids = [] if grids is None else grids
        self.before = [] if before is None else before
        self.after = [] if after is None else after
        self.legend = {} if legend is None else legend
        self.heading, self.csv_rows, self.data = heading, csv_rows, data

    def __repr__(self) -> str:
        return f"Document({vars(self)})"


def columns(headers: list[str], rows: list[list]) -> str:
    """Plain aligned columns with no rules, as ``ps`` and ``ip`` print them: for listings a person
    scans or a script splits on whitespace (topology list/show/status, hosts check/facts)."""
    rows = [[str(cell) for cell in row] for row in rows]
    widths = [max([len(str(h)), *(len(row[i]) for row in rows)]) for i, h in enumerate(headers)]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
                     for row in [list(map(str, headers)), *rows])

