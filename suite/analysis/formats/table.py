"""Text tables for a terminal (rich): report, compare, and what ``run`` prints."""

APPLIES = ("run", "report", "compare")


def document(doc) -> str:
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
