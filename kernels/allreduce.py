"""OSU-style MPI_Allreduce latency over message sizes; min/avg/max of the per-rank averages.

numpy and MPI are imported by ``run`` alone: the launcher imports this module to parse options.
"""

from vnetbench.core.options import int_range

from .sizes import check_ladder, ladder

DESCRIPTION = "Allreduce (sum of float64) latency over message sizes, min/avg/max across ranks"
MIN_RANKS = 1
LARGE = 8192


def add_arguments(parser):
    parser.add_argument("--min-size", type=int_range(8), default=8, help="smallest message, bytes (default 8)")
    parser.add_argument("--max-size", type=int_range(8), default=1 << 20,
                        help="largest message, bytes (default 1 MiB)")
    parser.add_argument("--iterations", type=int_range(1, 10**7), default=1000,
                        help="timed calls for small messages (default 1000, as OSU)")
    parser.add_argument("--warmup", type=int_range(0, 10**6), default=100)
    parser.add_argument("--large-iterations", type=int_range(1, 10**7), default=100,
                        help=f"timed calls above {LARGE} bytes (default 100)")
    parser.add_argument("--large-warmup", type=int_range(0, 10**6), default=10)


def check(params, ranks):
    check_ladder(params["min_size"], params["max_size"], smallest=8)


def default_timeout(params, ranks):
    return 900.0


def run(comm, params):
    import numpy as np
    from mpi4py import MPI

    rank, nranks = comm.Get_rank(), comm.Get_size()
    sizes = ladder(params["min_size"], params["max_size"])
    count_max = params["max_size"] // 8
    send = np.full(count_max, rank + 1, dtype=np.float64)
    recv = np.zeros(count_max, dtype=np.float64)
    expected = nranks * (nranks + 1) / 2
    rows, wrong = [], []
    for size in sizes:
        count = size // 8
        iters, warm = ((params["large_iterations"], params["large_warmup"]) if size > LARGE
                       else (params["iterations"], params["warmup"]))
        sendspec, recvspec = [send[:count], MPI.DOUBLE], [recv[:count], MPI.DOUBLE]
        allreduce = comm.Allreduce
        for _ in range(warm):
            allreduce(sendspec, recvspec, MPI.SUM)
        recv[:count] = 0
        comm.Barrier()
        start = MPI.Wtime()
        for _ in range(iters):
            allreduce(sendspec, recvspec, MPI.SUM)
        mine = (MPI.Wtime() - start) / iters * 1e6
        if not (recv[:count] == expected).all():
            wrong.append(size)
        times = comm.gather(mine, root=0)
        if rank == 0:
            rows.append({"bytes": size, "avg_us": float(np.mean(times)), "min_us": float(min(times)),
                         "max_us": float(max(times)), "iterations": iters, "warmup": warm})
    wrong_everywhere = comm.gather(wrong, root=0)
    if rank != 0:
        return None
    bad = sorted({size for per_rank in wrong_everywhere for size in per_rank})
    metrics = {"sizes": rows}
    if bad:
        return metrics, {"passed": False, "detail": f"wrong sums at sizes {bad} bytes"}
    return metrics, {"passed": True, "detail": f"sum checked on every rank at {len(rows)} sizes"}


# --- what report, compare and plots read (kernels/contract.py) ---------------------------

SMOKE = ["--max-size", "4096", "--iterations", "50", "--warmup", "5"]


def _avg_at(size):
    from .contract import size_metric

    return size_metric("avg_us", "average latency", "us", "lower")(size)


def metrics(m):
    from .contract import per_size

    return per_size(m, "avg_us", _avg_at)


def table(names):
    from .contract import smallest_and_largest

    return smallest_and_largest("avg_us", "avg_us")(names)


def headline(m):
    from .contract import ends

    small, large = ends(m)
    return [(f"avg us @{small.get('bytes', '?')}B", small.get("avg_us")),
            (f"avg us @{large.get('bytes', '?')}B", large.get("avg_us"))]


SIZE_COLUMNS = {"bytes": "size (B)", "avg_us": "avg us", "min_us": "min us", "max_us": "max us",
                "iterations": "iterations"}


def size_rows(m):
    from .contract import size_table

    return size_table(m, SIZE_COLUMNS)


def _osu():
    from .contract import OsuColumn, OsuLayout

    # osu_allreduce -f (min, max and iterations beside the average); the sum is of float64
    return (OsuLayout("OSU MPI Allreduce Latency Test", "MPI_DOUBLE",
                      (OsuColumn("Avg Latency(us)", "avg_us"), OsuColumn("Min Latency(us)", "min_us"),
                       OsuColumn("Max Latency(us)", "max_us"), OsuColumn("Iterations", "iterations", 12, True))),)


OSU = _osu()
