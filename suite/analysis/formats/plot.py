"""Plots of a store as one image (``report --plot FILE.png``): drawn by plots.py with matplotlib."""

APPLIES = ("report",)
OPTION = "--plot"
METAVAR = "FILE.png"
HELP = "also draw the plots into FILE.png (matplotlib)"
SUFFIXES = (".png", ".svg", ".pdf")


def write_report(path: str, runs: list[dict], tables, context: dict) -> str:
    from .. import plots

    return f"{plots.save(runs, tables, path, baseline=context['baseline'])} plot(s)"
