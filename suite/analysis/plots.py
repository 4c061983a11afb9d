"""Plots of a store (matplotlib, Agg): scaling against ranks, and latency and bandwidth against message size.

matplotlib is imported only when a plot is drawn, so the CLI starts fast without it.
"""

import io
import statistics
import textwrap
from collections import defaultdict
from dataclasses import dataclass

from ..core.errors import UsageError
from ..kernels.contract import series_label
from . import format as fmt
from . import metrics
from .records import canonical, run_options_of, topology_name
from .tables import StudyTable

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f"]
STUDY_ORDER = ("native", "1vm", "2vm-1vswitch", "2vm-2vswitch", "4vm-1vswitch", "4vm-4vswitch")


def _color(topology: str) -> str:
    # one colour per topology in every panel: the study's six first, others after in name order
    if topology in STUDY_ORDER:
        return COLORS[STUDY_ORDER.index(topology)]
    return COLORS[len(STUDY_ORDER) + sum(map(ord, topology)) % (len(COLORS) - len(STUDY_ORDER))]


def _plain_numbers(axis, low: float, high: float) -> None:
    from matplotlib import ticker

    plain = ticker.FuncFormatter(lambda value, _: fmt.number(float(value)))
    axis.set_major_formatter(plain)
    # within one decade a log axis has no major ticks to speak of: label the minor ones instead
    axis.set_minor_formatter(plain if high < 10 * low else ticker.NullFormatter())


def _bytes(value, _=None) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if value >= scale:
            return f"{value / scale:g}{unit}"
    return f"{value:g}"


@dataclass
class Panel:
    kernel: str
    params_label: str
    title: str
    draw: object  # function(ax)


def pyplot():
    try:
        import matplotlib
    except ImportError:
        raise UsageError("--plot: needs matplotlib; install it with: pip install 'vnetbench[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def panels(records: list[dict], tables: list[StudyTable], baseline: str = "native") -> list[Panel]:
    """What to draw, in report order: per kernel setting, one scaling panel when its table metric
    scales with ranks, else one panel per per-size series its kernel declares."""
    out, seen = [], set()
    for table in tables:
        key = (table.kernel, canonical(table.params), canonical(table.run_options))
        if key in seen:
            continue
        group = [r for r in records if (r["kernel"], canonical(r["params"]), canonical(run_options_of(r))) == key]
        suffix = f" ({table.params_label})" if table.params_label else ""
        if table.metric.scaling:
            seen.add(key)
            out.append(Panel(table.kernel, table.params_label, f"{table.kernel}: {table.metric.label} vs ranks{suffix}",
                             lambda ax, t=table: _draw_scaling(ax, t, baseline)))
        else:
            seen.add(key)
            for name, metric in _size_series(group).items():
                unit = f" ({metric.unit})" if metric.unit else ""
                out.append(Panel(table.kernel, table.params_label,
                                 f"{table.kernel}: {series_label(metric)} vs message size{suffix}",
                                 lambda ax, g=group, n=name, y=series_label(metric) + unit: _draw_sizes(ax, g, n, y)))
    return out


def _size_series(group: list[dict]) -> dict:
    """Per-size series name -> one of its metrics, in the order the kernel declares them."""
    out = {}
    for record in group:
        for metric in metrics.described(record).values():
            if metric.size is not None:
                out.setdefault(metric.series, metric)
    return out


def _draw_scaling(ax, table: StudyTable, baseline: str) -> None:
    ideal_from = next((row for row in table.rows if row.topology == baseline), table.rows[0] if table.rows else None)
    lows, highs = [], []
    for row in table.rows:
        points = [(n, row.cells[n].summary) for n in table.rank_counts if n in row.cells and row.cells[n].summary]
        if not points:
            continue
        xs = [n for n, _ in points]
        ys = [s.median for _, s in points]
        errors = [[s.median - s.min for _, s in points], [s.max - s.median for _, s in points]]
        lows.append(min(s.min for _, s in points))
        highs.append(max(s.max for _, s in points))
        color = _color(row.topology)
        ax.errorbar(xs, ys, yerr=errors, marker="o", capsize=3, color=color, label=row.label)
        if row is ideal_from and len(xs) > 1:
            x0, y0 = xs[0], ys[0]
            factor = (lambda n: x0 / n) if table.metric.better == "lower" else (lambda n: n / x0)
            ideal = [n for n in table.rank_counts if n >= x0]
            ax.plot(ideal, [y0 * factor(n) for n in ideal], linestyle="--", color="grey",
                    label=f"ideal scaling from {row.label} x{x0}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(table.rank_counts)
    ax.set_xticklabels([str(n) for n in table.rank_counts])
    ax.xaxis.set_minor_formatter(_null())
    if lows:
        _plain_numbers(ax.yaxis, min(lows), max(highs))
    ax.set_xlabel("MPI ranks")
    unit = f" ({table.metric.unit})" if table.metric.unit else ""
    ax.set_ylabel(f"{table.metric.label}{unit}, median")


def _draw_sizes(ax, group: list[dict], name: str, ylabel: str) -> None:
    lines = defaultdict(lambda: defaultdict(list))
    for record in group:
        for size, value in metrics.series(record, name):
            lines[(topology_name(record), record["ranks"])][size].append(value)
    several_counts = len({ranks for _, ranks in lines}) > 1
    styles, values = ["-", "--", ":", "-."], []
    order = sorted(lines, key=lambda k: (STUDY_ORDER.index(k[0]) if k[0] in STUDY_ORDER else 99, k))
    for (topology, ranks) in order:
        by_size = lines[(topology, ranks)]
        sizes = sorted(by_size)
        label = f"{topology} x{ranks}" if several_counts else topology
        style = styles[sorted({r for t, r in lines if t == topology}).index(ranks) % len(styles)]
        medians = [statistics.median(by_size[s]) for s in sizes]
        values += medians
        ax.plot(sizes, medians, marker=".", color=_color(topology), linestyle=style, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    from matplotlib import ticker

    ax.xaxis.set_major_formatter(ticker.FuncFormatter(_bytes))
    if values:
        _plain_numbers(ax.yaxis, min(values), max(values))
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel(ylabel + ", median")


def _null():
    from matplotlib import ticker

    return ticker.NullFormatter()


def _figure(plt, chosen: list[Panel], columns: int):
    rows = (len(chosen) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(6.4 * columns, 4.6 * rows), squeeze=False)
    for ax, panel in zip(axes.flat, chosen):
        panel.draw(ax)
        ax.set_title(textwrap.fill(panel.title, 64), fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(chosen):]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def save(records: list[dict], tables: list[StudyTable], path: str, baseline: str = "native") -> int:
    """Draw every panel into one image at ``path``; the number of panels drawn."""
    chosen = panels(records, tables, baseline)
    if not chosen:
        return 0
    plt = pyplot()
    fig = _figure(plt, chosen, 2 if len(chosen) > 1 else 1)
    try:
        fig.savefig(path, dpi=110)
    except OSError as exc:
        raise UsageError(f"--plot: cannot write {path}: {exc.strerror}") from None
    finally:
        plt.close(fig)
    return len(chosen)


def png(chosen: list[Panel]) -> bytes:
    """The panels side by side as PNG bytes (for the HTML page)."""
    plt = pyplot()
    fig = _figure(plt, chosen, min(2, len(chosen)))
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=96)
    plt.close(fig)
    return buffer.getvalue()
