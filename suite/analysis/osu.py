"""Per-size rows in the OSU micro-benchmarks' own layout, so vnetbench's output and OSU's can be diffed.

The layout is OSU 7.1's (util/osu_util.c, print_header / print_only_header / print_stats, and
the per-size printf of osu_latency.c and osu_bw.c): a ``# TITLE v7.1`` line, ``# Datatype: T.``,
then ``# Size`` left-aligned in 10 characters and each column right-aligned in FIELD_WIDTH (20)
with FLOAT_PRECISION (2) decimals; collectives print an empty line first. Which OSU outputs a
kernel's rows correspond to, the kernel declares (``OSU``, kernels/contract.py).
"""

from . import metrics as registry

OSU_VERSION = "7.1"  # the release whose layout this follows
SIZE_WIDTH = 10


def _value(column, value) -> str:
    if registry.number(value) is None:
        return f"{'-':>{column.width}}"
    return f"{int(value):>{column.width}d}" if column.whole else f"{value:>{column.width}.2f}"


def layout(layout, rows: list[dict]) -> list[str]:
    """The lines one OSU benchmark would print for these rows of ``metrics["sizes"]``."""
    lines = [""] if layout.collective else []
    lines += [f"# {layout.title} v{OSU_VERSION}", f"# Datatype: {layout.datatype}.",
              f"{'# Size':<{SIZE_WIDTH}}" + "".join(f"{c.header:>{c.width}}" for c in layout.columns)]
    for row in rows:
        if isinstance(row, dict) and isinstance(row.get("bytes"), int):
            lines.append(f"{row['bytes']:<{SIZE_WIDTH}d}" + "".join(_value(c, row.get(c.field)) for c in layout.columns))
    return lines


def text(records: list[dict]) -> str | None:
    """Every record's OSU outputs, one after the other; None when no record's kernel declares one."""
    blocks = []
    for record in records:
        module = registry.workload(record["kernel"])
        rows = record["metrics"].get("sizes") if isinstance(record.get("metrics"), dict) else None
        if module is None or not hasattr(module, "OSU") or not isinstance(rows, list):
            continue
        blocks += ["\n".join(layout(item, rows)) for item in module.OSU]
    return "\n\n".join(blocks) if blocks else None


def check(kernel: str) -> None:
    """UsageError, before anything runs, when ``kernel`` has no OSU counterpart."""
    from ..errors import UsageError
    from ..kernels import KERNELS

    if not hasattr(registry.workload(kernel) or object(), "OSU"):
        able = [name for name in KERNELS if hasattr(registry.workload(name) or object(), "OSU")]
        raise UsageError(f"--format: osu is for kernels with an OSU counterpart ({', '.join(able)}), not {kernel}")
