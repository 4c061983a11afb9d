"""The contract every workload fills: a kernel module here, or (later) an application definition.

A workload declares everything the rest of vnetbench needs to know about it; report, compare,
plots and html learn it from here and hold no per-kernel knowledge of their own.

A kernel is one module in this package, registered by name in ``KERNELS`` (``__init__.py``),
exposing:

- ``DESCRIPTION``: one line, shown by ``vnetbench run --help``;
- ``MIN_RANKS``: the fewest ranks it runs on;
- ``add_arguments(parser)``: its options, with their defaults (the one place they live);
- ``check(params, ranks)``: raises ``UsageError`` naming the option when the values cannot run
  (called by the launcher before anything starts, and again on the ranks);
- ``default_timeout(params, ranks)``: seconds after which a run is presumed hung;
- ``run(comm, params)``: runs on every rank and returns ``(metrics, validation)`` on rank 0,
  where validation is ``{"passed": bool, "detail": str}``; other ranks may return anything;
- ``metrics(m)``: given a record's ``metrics`` dict, the list of ``(Metric, raw value)`` it holds
  (the caller keeps only finite numbers; the function may assume the shape ``run`` wrote but
  must not fail on a missing key: return what is there);
- ``table(names)``: given the metric names present, those the study-shaped tables and plots
  show, in order (the first is the headline metric of the study table);
- ``headline(m)``: given a record's ``metrics`` dict, ``[(column, value)]`` that ``run`` prints
  for one record (a few numbers, units in the column name);
- ``SMOKE``: kernel options (argv, as typed after the kernel name) for a run of a few seconds at
  2 ranks; the test that runs every registered kernel uses them.

Optional:

- ``resolve(params)``: ``params`` with the defaults that depend on other options filled in (md's
  ``--electrostatics`` follows ``--system``), so that a record's params, and so its configuration key,
  say what ran;

- ``breakdown(runs)`` with ``BREAKDOWN_TITLE``: given the passing records of one configuration,
  ``{column: value}`` showing where the headline number comes from (a value may be a number, a
  ``{part: number}`` mapping or a list of numbers; medians over ``runs``), or None;
- ``size_rows(m)``: given a record's ``metrics`` dict, its per-size table as
  ``[{column: value}]`` with ``bytes`` first (what ``run`` prints per message size);
- ``OSU``: the OSU micro-benchmarks outputs the kernel's per-size rows correspond to, as
  ``OsuLayout`` values (``run --format osu`` prints them in OSU's own layout, to diff).

Per-size metrics (``Metric.size`` set) are drawn against message size, one panel per series;
table metrics with ``scaling`` against rank count. The kernels' order in the registry is the
order of the report.

Importing a kernel module must not initialise MPI: the launcher imports kernels to parse options.
"""

from collections import namedtuple
from collections.abc import Callable


class Metric(namedtuple("Metric", "name label unit better scaling size", defaults=(False, None))):
    """One number a workload reports, and how to read it: ``name``, a stable key ("elapsed_s",
    "bandwidth_mbps.triad", "latency_us@8B"); ``label``, for people ("elapsed", "triad bandwidth", "latency at
    8 B"); ``unit``; ``better``: "lower", "higher", or None when vnetbench does not know; ``scaling``: speedup
    and efficiency across rank counts mean something; ``size``: the message size in bytes, for per-size
    metrics (a series over sizes). A named tuple, not a dataclass (``vnetbench.cli`` says why)."""

    __slots__ = ()

    def __new__(cls, name: str, label: str, unit: str, better: str | None, scaling: bool = False,
                size: int | None = None):
        if better not in ("lower", "higher", None):
            raise ValueError(f"Metric {name}: better must be 'lower', 'higher' or None, not {better!r}")
        return super().__new__(cls, name, label, unit, better, scaling, size)

    @property
    def series(self) -> str:
        """The name shared by every size of a per-size metric ("latency_us" for "latency_us@8B")."""
        return self.name.rsplit("@", 1)[0] if self.size is not None else self.name


TableChooser = Callable[[list[str]], list[str]]


def size_metric(series: str, label: str, unit: str, better: str | None) -> Callable[[int], Metric]:
    """A per-size metric family: ``size_metric("latency_us", "latency", "us", "lower")(8)`` is latency_us@8B."""

    def at(size: int) -> Metric:
        return Metric(f"{series}@{size}B", f"{label}{SIZE_LABEL}{size} B", unit, better, size=size)

    return at


SIZE_LABEL = " at "


def series_label(metric: Metric) -> str:
    """The label a per-size metric's series shares ("latency" for "latency at 8 B")."""
    if metric.size is None:
        return metric.label
    return metric.label.removesuffix(f"{SIZE_LABEL}{metric.size} B")


def per_size(m: dict, field: str, metric: Callable[[int], Metric]) -> list[tuple[Metric, object]]:
    """``(metric(size), row[field])`` for each row of ``m["sizes"]``: the per-size metrics' common shape."""
    rows = m.get("sizes")
    if not isinstance(rows, list):
        return []
    out = []
    for row in rows:
        size = row.get("bytes") if isinstance(row, dict) else None
        if isinstance(size, int) and not isinstance(size, bool) and size >= 0:
            out.append((metric(size), row.get(field)))
    return out


def smallest_and_largest(small_series: str, large_series: str) -> TableChooser:
    """A table chooser: the smallest size of one per-size series and the largest of another."""

    def choose(names):
        def size(name):
            return int(name.rsplit("@", 1)[1][:-1])

        small = sorted((n for n in names if n.startswith(small_series + "@")), key=size)
        large = sorted((n for n in names if n.startswith(large_series + "@")), key=size)
        return list(dict.fromkeys([*small[:1], *large[-1:]]))

    return choose


def ends(m: dict) -> tuple[dict, dict]:
    """The first and last rows of ``m["sizes"]`` (``{}`` when there are none): a headline's usual pair."""
    rows = [row for row in m.get("sizes") or [] if isinstance(row, dict)] if isinstance(m.get("sizes"), list) else []
    return (rows[0], rows[-1]) if rows else ({}, {})


def size_table(m: dict, columns: dict[str, str]) -> list[dict]:
    """``m["sizes"]`` as rows of ``{column title: value}``, for the fields in ``columns`` the rows hold."""
    rows = [row for row in m.get("sizes") or [] if isinstance(row, dict)] if isinstance(m.get("sizes"), list) else []
    present = [field for field in columns if any(field in row for row in rows)]
    return [{columns[field]: row.get(field) for field in present} for row in rows]


class OsuColumn(namedtuple("OsuColumn", "header field width whole", defaults=(18, False))):
    """One column of an OSU benchmark's output: OSU's title (``header``, e.g. "Avg Latency(us)"), the key in
    each row of ``metrics["sizes"]`` (``field``), the ``width`` (OSU 7.4's FIELD_WIDTH, 12 for the iteration
    count), and whether it is printed as an integer (``whole``: OSU's "%*lu"), else "%*.2f"."""

    __slots__ = ()


class OsuLayout(namedtuple("OsuLayout", "title datatype columns")):
    """One OSU benchmark's output: an empty line, ``# TITLE vVERSION`` (``title``, e.g. "OSU MPI Latency
    Test"), ``# Datatype: ...`` (e.g. "MPI_CHAR"), the header of its ``columns``, a row per size."""

    __slots__ = ()
