"""JSON: a document's data (report's tables and context, compare's verdicts), for scripts."""

APPLIES = ("report", "compare")


def document(doc) -> str:
    import json  # the standard library's: imports are absolute

    data = doc.data
    if data is None:
        data = [{"title": g.title, "headers": g.headers, "rows": g.rows, "notes": g.notes} for g in doc.grids]
    return json.dumps(data, indent=2, sort_keys=True)
