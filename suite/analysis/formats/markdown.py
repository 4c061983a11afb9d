"""Markdown tables (GitHub's): report and compare, for CI comments and pages."""

APPLIES = ("report", "compare")


def _cell(cell: str) -> str:
    return cell.replace("|", "\\|")


def document(doc) -> str:
    lines = [f"### {doc.heading}", ""] if doc.heading else []
    lines += [f"- {line}" if doc.heading else f"_{line}_" for line in doc.before]
    for grid in doc.grids:
        lines += ["", f"### {grid.title}", ""] if grid.title else [""]
        lines += ["| " + " | ".join(map(_cell, grid.headers)) + " |", "|" + "---|" * len(grid.headers)]
        lines += ["| " + " | ".join(map(_cell, row)) + " |" for row in grid.rows]
        lines += [f"\n_note: {note}_" for note in grid.notes]
    lines += [""] + [f"- {line}" for line in doc.after] if doc.after else []
    lines += [""] + [f"- **{key}**: {meaning}" for key, meaning in doc.legend.items()] if doc.legend else []
    return "\n".join(lines).strip()
