"""McCalpin STREAM (copy, scale, add, triad) on every rank at once; per-rank and summed MB/s.

numpy, numba and MPI are imported by the rank side alone: the launcher, report and compare import this
module for its options and metrics, and must start fast.
"""

import math
import os
from pathlib import Path

from vnetbench.core.errors import UsageError
from vnetbench.core.options import int_range

DESCRIPTION = "STREAM memory bandwidth (copy, scale, add, triad) on every rank, per rank and summed"
MIN_RANKS = 1

OPS = ("copy", "scale", "add", "triad")
ARRAYS_MOVED = {"copy": 2, "scale": 2, "add": 3, "triad": 3}  # STREAM's counting: no write-allocate
SCALAR = 3.0
EPSILON = 1e-13  # STREAM's bound on the average relative error for float64
FALLBACK_LLC = 32 << 20
CACHE_ROOT = Path("/sys/devices/system/cpu/cpu0/cache")


def add_arguments(parser):
    parser.add_argument("--array-size", type=int_range(1), default=None, metavar="N",
                        help="float64 elements per array per rank (default: each array 4x the "
                             "last-level cache, as STREAM's rules ask)")
    parser.add_argument("--ntimes", type=int_range(2, 10**6), default=20,
                        help="repetitions of the four loops; the first is not timed (default 20)")


def check(params, ranks):
    ntimes = params["ntimes"]
    if not _whole(ntimes) or ntimes < 2:
        raise UsageError(f"--ntimes: {ntimes!r} is not allowed; use a whole number >= 2 "
                         f"(the first repetition is not timed)")
    size = params["array_size"]
    if size is not None and (not _whole(size) or size < 1):
        raise UsageError(f"--array-size: {size!r} is not allowed; use a whole number of elements >= 1")
    check_memory("--array-size", 3 * 8 * array_size(params), ranks,
                 f"{array_size(params)} elements x 3 arrays x 8 B")


def default_timeout(params, ranks):
    # ten arrays' worth of traffic per repetition at a pessimistic 0.5 GB/s per rank
    # (oversubscribed or remote memory), plus numba's first compile and page faulting
    per_rank = 10 * 8 * array_size(params) * params["ntimes"]
    return 180.0 + per_rank / 0.5e9


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --- machine facts (pure functions of files, so tests can feed them) ---

def parse_cache_size(text: str) -> int:
    """Bytes from sysfs's cache size notation: '32768K', '1M', '512' (bytes)."""
    text = text.strip().upper()
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text and text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)


def llc_bytes(root: Path = CACHE_ROOT) -> int:
    """Size of the highest cache level cpu0 sees (the largest of that level); 32 MiB if unknown."""
    found = {}
    for index in sorted(root.glob("index*")):
        try:
            level = int((index / "level").read_text())
            size = parse_cache_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        found[level] = max(size, found.get(level, 0))
    if not found:
        return FALLBACK_LLC
    return found[max(found)]


def default_array_size(llc: int) -> int:
    """Elements per array so that each array is at least four times the last-level cache."""
    return math.ceil(4 * llc / 8)


def array_size(params, llc: int | None = None) -> int:
    if params["array_size"] is not None:
        return params["array_size"]
    return default_array_size(llc_bytes() if llc is None else llc)


def mem_available(path: Path = Path("/proc/meminfo")) -> int | None:
    """MemAvailable in bytes, or None where the kernel does not say."""
    try:
        for line in path.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def ranks_on_this_host(ranks: int) -> int:
    """Ranks sharing this host's memory: Open MPI or MPICH tell each rank; the launcher
    does not know placement and must assume every rank lands here."""
    for var in ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return ranks


def check_memory(option: str, bytes_per_rank: int, ranks: int, what: str,
                 available: int | None = None) -> None:
    """UsageError naming ``option`` when the ranks on this host would not fit in MemAvailable."""
    available = mem_available() if available is None else available
    if available is None:
        return
    here = ranks_on_this_host(ranks)
    need = bytes_per_rank * here
    if need > available:
        raise UsageError(f"{option}: {what} x {here} ranks on this host needs {need >> 20} MiB; "
                         f"allowed: at most {available >> 20} MiB (MemAvailable)")


# --- the rank side ---

def expected_values(ntimes: int) -> tuple[float, float, float]:
    """a, b, c after the timed loop, replayed in scalars as STREAM's checkSTREAMresults does."""
    a, b, c = 1.0, 2.0, 0.0
    a = 2.0 * a  # stream.c doubles a[] while it measures the clock granularity
    for _ in range(ntimes):
        c = a
        b = SCALAR * c
        c = a + b
        a = b + SCALAR * c
    return a, b, c


def run(comm, params):
    import numpy as np
    from mpi4py import MPI

    from . import _stream_loops as loops

    loops.warm_up()  # compile before anything is timed
    rank, nranks = comm.Get_rank(), comm.Get_size()
    llc = llc_bytes()
    # every rank moves the same amount, sized for the largest cache among their hosts
    n = comm.allreduce(array_size(params, llc), op=MPI.MAX)
    ntimes = params["ntimes"]
    a, b, c = _arrays(n, loops)
    mine = _timed_loops(comm, a, b, c, ntimes, loops)
    slowest = np.empty_like(mine)
    comm.Allreduce(mine, slowest, op=MPI.MAX)
    problems = _validate(a, b, c, ntimes, loops)
    bytes_per_op = {op: ARRAYS_MOVED[op] * 8 * n for op in OPS}
    own = {"rank": rank, "llc_bytes": llc, "problems": problems,
           "best_s": {op: float(mine[i, 1:].min()) for i, op in enumerate(OPS)}}
    everyone = comm.gather(own, root=0)
    if rank != 0:
        return None
    metrics = {
        "array_size": n,
        "ntimes": ntimes,
        "bytes_per_array": 8 * n,
        "llc_bytes": llc,
        "bandwidth_mbps": {op: nranks * bytes_per_op[op] / _positive(slowest[i, 1:].min()) / 1e6
                           for i, op in enumerate(OPS)},
        "times_s": {op: _time_stats(slowest[i]) for i, op in enumerate(OPS)},
        "per_rank": [_rank_entry(entry, bytes_per_op) for entry in everyone],
    }
    return metrics, _verdict(everyone, ntimes)


def _arrays(n, loops):
    import numpy as np

    # np.empty leaves pages untouched, so fill() places them on this rank's NUMA node
    a, b, c = np.empty(n), np.empty(n), np.empty(n)
    loops.fill(a, 1.0)
    loops.fill(b, 2.0)
    loops.fill(c, 0.0)
    loops.scale(a, a, 2.0)
    return a, b, c


def _timed_loops(comm, a, b, c, ntimes, loops):
    """Seconds per (op, repetition) on this rank; every op starts on all ranks together."""
    from time import perf_counter

    import numpy as np

    times = np.zeros((len(OPS), ntimes))
    barrier = comm.Barrier
    copy, scale, add, triad = loops.copy, loops.scale, loops.add, loops.triad
    for k in range(ntimes):
        barrier()
        start = perf_counter()
        copy(c, a)
        times[0, k] = perf_counter() - start
        barrier()
        start = perf_counter()
        scale(b, c, SCALAR)
        times[1, k] = perf_counter() - start
        barrier()
        start = perf_counter()
        add(c, a, b)
        times[2, k] = perf_counter() - start
        barrier()
        start = perf_counter()
        triad(a, b, c, SCALAR)
        times[3, k] = perf_counter() - start
    return times


def _validate(a, b, c, ntimes, loops) -> list[str]:
    problems = []
    for name, array, expected in zip("abc", (a, b, c), expected_values(ntimes)):
        error = loops.avg_abs_error(array, expected) / abs(expected)
        if not error <= EPSILON:  # also catches NaN
            problems.append(f"{name}[] average relative error {error:.3g} > {EPSILON:g}")
    return problems


def _positive(seconds: float) -> float:
    # a timer can read 0 for a tiny array; JSON has no infinity
    return max(float(seconds), 1e-9)


def _time_stats(samples) -> dict:
    timed = samples[1:]
    return {"best": float(timed.min()), "avg": float(timed.mean()), "min": float(timed.min()),
            "max": float(timed.max()), "samples": [float(t) for t in samples]}


def _rank_entry(entry, bytes_per_op) -> dict:
    best = entry["best_s"]
    return {"rank": entry["rank"], "llc_bytes": entry["llc_bytes"], "best_s": best,
            "bandwidth_mbps": {op: bytes_per_op[op] / _positive(best[op]) / 1e6 for op in OPS}}


def _verdict(everyone, ntimes) -> dict:
    bad = [f"rank {entry['rank']}: {problem}" for entry in everyone for problem in entry["problems"]]
    if bad:
        return {"passed": False, "detail": "; ".join(bad)}
    return {"passed": True, "detail": f"a, b, c match STREAM's replay after {ntimes} repetitions "
                                      f"(average relative error <= {EPSILON:g}) on all {len(everyone)} ranks"}


# --- what report, compare and plots read (kernels/contract.py) ---------------------------

SMOKE = ["--array-size", "100000", "--ntimes", "3"]
TABLE_ORDER = ("triad", "copy", "scale", "add")
BREAKDOWN_OP = "triad"
BREAKDOWN_TITLE = f"{BREAKDOWN_OP} per VM and per rank, median of repetitions"


def _bandwidth(m) -> dict:
    bw = m.get("bandwidth_mbps")
    return bw if isinstance(bw, dict) else {}


def metrics(m):
    from .contract import Metric

    bw = _bandwidth(m)
    return [(Metric(f"bandwidth_mbps.{op}", f"{op} bandwidth", "MB/s", "higher", scaling=True), bw.get(op))
            for op in OPS]


def table(names):
    return [f"bandwidth_mbps.{op}" for op in TABLE_ORDER if f"bandwidth_mbps.{op}" in names]


def headline(m):
    bw = _bandwidth(m)
    return [(f"{op} MB/s", bw.get(op)) for op in OPS]


def breakdown(runs):
    """Where the summed bandwidth comes from: each VM's ranks added up (by their own best times),
    each rank's own bandwidth; medians over ``runs``. The summed figure is all ranks' bytes over
    the slowest rank's time, as STREAM across VMs is summed in the study."""
    from statistics import median

    runs = [r for r in runs if r["metrics"].get("per_rank")]
    if not runs:
        return None
    per_vm, per_rank = {}, {}
    for record in runs:
        where = {p["rank"]: p.get("vm") or p.get("hostname", "?") for p in record.get("placement") or []}
        sums = {}
        for entry in record["metrics"]["per_rank"]:
            value = entry["bandwidth_mbps"][BREAKDOWN_OP]
            per_rank.setdefault(entry["rank"], []).append(value)
            vm = where.get(entry["rank"], "?")
            sums[vm] = sums.get(vm, 0.0) + value
        for vm, total in sums.items():
            per_vm.setdefault(vm, []).append(total)
    return {"summed MB/s": median(_bandwidth(r["metrics"])[BREAKDOWN_OP] for r in runs),
            "per VM MB/s": {vm: median(values) for vm, values in sorted(per_vm.items())},
            "per rank MB/s": [median(values) for _, values in sorted(per_rank.items())]}
