"""One self-contained HTML page of a store's report: the study tables with their plots inlined as PNG.
A written format of ``report`` (``--html FILE``)."""

APPLIES = ("report",)
OPTION = "--html"
METAVAR = "FILE"
HELP = "also write one self-contained HTML page with tables and plots"
SUFFIXES = (".html", ".htm")
STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1em; margin: 1.2em 0 0.4em; }
table { border-collapse: collapse; margin-bottom: 0.6em; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
th { background: #f4f4f4; }
td.noisy { background: #fff1c2; } td.worse { color: #a40000; } td.better { color: #006400; }
img { max-width: 100%; } .meta, .legend { color: #555; } .warn { color: #a40000; }
"""


def _cell_class(header: str, text: str) -> str:
    if "*" in text:
        return "noisy"
    if header.startswith("overhead") and text.startswith("+"):
        return "worse"
    if header.startswith("overhead") and text.startswith("-") and text != "-":
        return "better"
    return ""


def _table(table) -> str:
    import html

    from ..report import study_grid

    headers, body = study_grid(table)
    out = [f"<h3>{html.escape(table.title())}</h3>", "<table>", "<tr>"]
    out += [f"<th>{html.escape(h)}</th>" for h in headers] + ["</tr>"]
    for row in body:
        cells = []
        for header, text in zip(headers, row):
            css = _cell_class(header, text)
            cells.append(f"<td class=\"{css}\">{html.escape(text)}</td>" if css else f"<td>{html.escape(text)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def page(runs: list[dict], tables: list, *, store: str = "", baseline: str = "native",
         skipped_lines=(), **context) -> str:
    """The page as a string; plots are drawn only when matplotlib is installed."""
    import base64
    import datetime
    import html

    from vnetbench.core.errors import UsageError

    from .. import plots
    from ..report import LEGEND

    stamp = datetime.datetime.now().isoformat(timespec="seconds")
    parts = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
             f"<title>vnetbench report: {html.escape(store)}</title><style>{STYLE}</style></head><body>",
             "<h1>vnetbench report</h1>",
             f"<p class=\"meta\">store {html.escape(store)}: {context.get('records', len(runs))} record(s), "
             f"{context.get('not_ok', 0)} not ok (not measured); overhead against {html.escape(baseline)}; "
             f"written {stamp}</p>"]
    if skipped_lines:
        parts.append(f"<p class=\"warn\">{len(skipped_lines)} unreadable line(s) skipped: "
                     + html.escape(", ".join(f"line {s['line']} ({s['reason']})" for s in skipped_lines)) + "</p>")
    try:
        drawn = plots.panels(runs, tables, baseline)
        plots.pyplot()  # raises when matplotlib is missing
    except UsageError as exc:
        drawn = []
        parts.append(f"<p class=\"warn\">no plots: {html.escape(str(exc))}</p>")
    kernels = list(dict.fromkeys(table.kernel for table in tables))
    for kernel in kernels:
        parts.append(f"<h2>{html.escape(kernel)}</h2>")
        parts += [_table(table) for table in tables if table.kernel == kernel]
        mine = [panel for panel in drawn if panel.kernel == kernel]
        if mine:
            data = base64.b64encode(plots.png(mine)).decode()
            parts.append(f"<p><img alt=\"{html.escape(kernel)} plots\" src=\"data:image/png;base64,{data}\"></p>")
    parts.append("<ul class=\"legend\">" + "".join(f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>"
                                                   for k, v in LEGEND.items()) + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(path, runs: list[dict], tables: list, context: dict) -> str:
    """Write the page for the ok ``runs`` and their ``tables`` to ``path``."""
    from pathlib import Path

    from vnetbench.core.errors import UsageError

    try:
        Path(path).write_text(page(runs, tables, **context), encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--html: cannot write {path}: {exc.strerror}") from None
    return "report"
