"""Per-size rows in the OSU micro-benchmarks' own layout, so vnetbench's output and OSU's can be diffed.

The layout is OSU 7.4's, as its programs print it (tests/data/apps/osu_*.txt were captured from them, and
tests/unit/test_osu_layout.py prints their numbers through this module and compares line by line): an
empty line, ``# TITLE v7.4``, ``# Datatype: T.``, then ``# Size`` left-aligned in 10 characters and each
column right-aligned in FIELD_WIDTH (18) with FLOAT_PRECISION (2) decimals, the iteration count in 12.
The datatype is what the kernel sends: MPI_CHAR for pingpong (as osu_latency and osu_bw), MPI_DOUBLE for
allreduce (a float64 sum; osu_allreduce's own default is MPI_CHAR, so that one line differs in a diff).
Which OSU outputs a kernel's rows correspond to, the kernel declares (``OSU``, kernels/contract.py).
A printed format of ``run`` (``--format osu``).
"""

APPLIES = ("run",)
OSU_VERSION = "7.4"  # the release whose layout this follows
SIZE_WIDTH = 10


def _value(column, value) -> str:
    from ..metrics import finite

    if finite(value) is None:
        return f"{'-':>{column.width}}"
    return f"{int(value):>{column.width}d}" if column.whole else f"{value:>{column.width}.2f}"


def layout(layout, rows: list[dict]) -> list[str]:
    """The lines one OSU benchmark would print for these rows of ``metrics["sizes"]``."""
    lines = ["", f"# {layout.title} v{OSU_VERSION}", f"# Datatype: {layout.datatype}.",
             f"{'# Size':<{SIZE_WIDTH}}" + "".join(f"{c.header:>{c.width}}" for c in layout.columns)]
    for row in rows:
        if isinstance(row, dict) and isinstance(row.get("bytes"), int):
            lines.append(f"{row['bytes']:<{SIZE_WIDTH}d}" + "".join(_value(c, row.get(c.field)) for c in layout.columns))
    return lines


def text(records: list[dict]) -> str | None:
    """Every record's OSU outputs, one after the other; None when no record's kernel declares one."""
    from .. import metrics as registry

    blocks = []
    for record in records:
        module = registry.workload(record["kernel"])
        rows = record["metrics"].get("sizes") if isinstance(record.get("metrics"), dict) else None
        if module is None or not hasattr(module, "OSU") or not isinstance(rows, list):
            continue
        blocks += ["\n".join(layout(item, rows)) for item in module.OSU]
    return "\n".join(blocks) if blocks else None  # each block starts with its empty line, as OSU's do


def records(records: list[dict]) -> str:
    """What ``run --format osu`` prints: the records' OSU outputs ("" when none has one)."""
    return text(records) or ""


def check(kernel: str) -> None:
    """UsageError, before anything runs, when ``kernel`` has no OSU counterpart."""
    from vnetbench.core.errors import UsageError
    from vnetbench.kernels import KERNELS

    from .. import metrics as registry

    if not hasattr(registry.workload(kernel) or object(), "OSU"):
        able = [name for name in KERNELS if hasattr(registry.workload(name) or object(), "OSU")]
        raise UsageError(f"--format: osu is for kernels with an OSU counterpart ({', '.join(able)}), not {kernel}")
