"""Text tables for a terminal (rich): report, compare, and what ``run`` prints.

A document made of plain text (printable ASCII, nothing rich would read as markup or emoji, tables that fit
the width) is drawn here as rich draws it, character for character: importing rich and its first table cost
about 0.1 s, paid after every ``vnetbench run``. Anything else goes to rich.
"""

import re

APPLIES = ("run", "report", "compare")
WIDTH = 200
# what rich would change in a line it prints as a string (``:name:`` emoji codes; markup in headers: ``[``)
_PLAIN = re.compile(r"[ -~]*")
_EMOJI = re.compile(r":\S*?:")


def document(doc) -> str:
    drawn = _drawn(doc)
    return drawn if drawn is not None else _rich(doc)


def _rich(doc) -> str:
    import io

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


def records(records: list[dict]) -> str:
    """What ``run`` prints: a row per record, then each record's per-size table."""
    from ..report import records_document, sizes_document

    doc = records_document(records)
    doc.grids += sizes_document(records).grids
    return document(doc)


def _line(text: str) -> bool:
    return bool(_PLAIN.fullmatch(text)) and not _EMOJI.search(text)


def _drawn(doc) -> str | None:
    """``doc`` as rich's Table (box HEAVY_HEAD, padding 1, left-justified) and Console(width=200) print it,
    or None when rich might lay it out otherwise (wrapping, wide or control characters, markup, emoji)."""
    out = []
    lines = [*doc.before, *doc.after, *(f"{key}: {value}" for key, value in doc.legend.items())]
    if not all(_line(line) for line in lines):
        return None
    out += doc.before
    for grid in doc.grids:
        headers, rows = [str(h) for h in grid.headers], grid.rows
        if not headers or not rows or any(len(row) != len(headers) for row in rows):
            return None
        if not all(_line(h) and "[" not in h for h in headers) or not all(_PLAIN.fullmatch(cell) for row in rows
                                                                           for cell in row):
            return None
        notes = [f"  note: {note}" for note in grid.notes]
        if grid.title and (not _line(grid.title) or len(grid.title) > WIDTH) or not all(map(_line, notes)):
            return None
        widths = [max(len(cells[i]) for cells in [headers, *rows]) for i in range(len(headers))]
        if sum(widths) + 3 * len(widths) + 1 > WIDTH:
            return None
        if grid.title:
            out += ["", grid.title]

        def rule(left, fill, cross, right):
            return left + cross.join(fill * (width + 2) for width in widths) + right

        def row(edge, cells):
            return edge + edge.join(f" {cell.ljust(width)} " for cell, width in zip(cells, widths)) + edge

        out += [rule("┏", "━", "┳", "┓"), row("┃", headers), rule("┡", "━", "╇", "┩"),
                *(row("│", cells) for cells in rows), rule("└", "─", "┴", "┘"), *notes]
    out += doc.after
    if doc.legend:
        out.append("")
    out += [f"{key}: {value}" for key, value in doc.legend.items()]
    return "\n".join(out).rstrip()
