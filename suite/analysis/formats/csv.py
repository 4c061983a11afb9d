"""CSV: a document's rows as numbers (its own csv rows, or its first grid), for spreadsheets and scripts."""

APPLIES = ("report", "compare")


def document(doc) -> str:
    import csv  # the standard library's: imports are absolute
    import io

    rows = doc.csv_rows
    if rows is None:
        rows = [doc.grids[0].headers, *doc.grids[0].rows] if doc.grids else []
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue().rstrip()
