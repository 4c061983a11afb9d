"""OSU-style point-to-point latency (half a round trip) and windowed bandwidth, rank 0 <-> last; with
``--bidirectional`` also OSU's bidirectional bandwidth (osu_bibw: both ranks send a window to each other at once,
the bytes of both directions over the time).

numpy, numba and MPI are imported inside the functions that run on the ranks: the launcher
imports this module to parse options, and must start fast.
"""

import functools

from vnetbench.core.errors import UsageError
from vnetbench.core.options import int_range

from .sizes import check_ladder, ladder, percentile

DESCRIPTION = "point-to-point latency and bandwidth between rank 0 and the last rank over message sizes"
MIN_RANKS = 2
LARGE = 8192  # OSU's boundary between small and large messages


def add_arguments(parser):
    parser.add_argument("--min-size", type=int_range(1), default=1, help="smallest message, bytes (default 1)")
    parser.add_argument("--max-size", type=int_range(1), default=4 << 20,
                        help="largest message, bytes (default 4 MiB)")
    parser.add_argument("--iterations", type=int_range(1, 10**7), default=10000,
                        help="latency round trips for small messages (default 10000, as OSU)")
    parser.add_argument("--warmup", type=int_range(0, 10**6), default=100,
                        help="untimed round trips before small messages (default 100)")
    parser.add_argument("--large-iterations", type=int_range(1, 10**7), default=1000,
                        help=f"latency round trips above {LARGE} bytes (default 1000)")
    parser.add_argument("--large-warmup", type=int_range(0, 10**6), default=10)
    parser.add_argument("--window", type=int_range(1, 4096), default=64,
                        help="messages in flight for bandwidth (default 64)")
    parser.add_argument("--large-window", type=int_range(1, 4096), default=None,
                        help=f"messages in flight for bandwidth above {LARGE} bytes (default: --window)")
    parser.add_argument("--bw-iterations", type=int_range(1, 10**6), default=100,
                        help="bandwidth windows for small messages (default 100; a fifth above 8 KiB)")
    parser.add_argument("--bidirectional", action="store_true",
                        help="also measure bidirectional bandwidth (both ranks send a window at once; bibw_mbps: "
                             "both directions' bytes over the time, as OSU's osu_bibw)")
    parser.add_argument("--validate", action="store_true", help="check every received payload")


def check(params, ranks):
    if ranks < MIN_RANKS:
        raise UsageError(f"--ranks: pingpong needs at least {MIN_RANKS} ranks, got {ranks}")
    check_ladder(params["min_size"], params["max_size"])
    window_bytes = _buffer_bytes(params)
    if window_bytes > 8 << 30:
        raise UsageError(f"--window: {params['window']} (--large-window {_window(params, params['max_size'])}) x "
                         f"--max-size {params['max_size']} bytes needs {window_bytes >> 20} MiB per rank; allowed: at "
                         f"most 8192 MiB")


def _window(params, size: int) -> int:
    large = params.get("large_window")
    return large if size > LARGE and large else params["window"]


def _buffer_bytes(params) -> int:
    """The bandwidth loops' buffer: the largest size's window, or the largest small size's."""
    big = params["max_size"]
    return max(big * _window(params, big), min(big, LARGE) * params["window"])


def default_timeout(params, ranks):
    return 900.0


def _counts(params, size):
    if size > LARGE:
        bw_iters = max(1, params["bw_iterations"] // 5)
        return params["large_iterations"], params["large_warmup"], bw_iters, max(1, params["large_warmup"])
    return params["iterations"], params["warmup"], params["bw_iterations"], max(1, params["warmup"] // 10)


def _pattern(size: int):
    import numpy as np

    return ((np.arange(size, dtype=np.int64) * 7 + size) % 251).astype(np.uint8)


def run(comm, params):
    import numpy as np
    from mpi4py import MPI

    rank, last = comm.Get_rank(), comm.Get_size() - 1
    active = rank in (0, last)
    peer = last if rank == 0 else 0
    sizes = ladder(params["min_size"], params["max_size"])
    sendbuf = np.zeros(_buffer_bytes(params) if active else 1, dtype=np.uint8)
    recvbuf = np.zeros(_buffer_bytes(params) if active else 1, dtype=np.uint8)
    ack = np.zeros(4, dtype=np.uint8)
    # compiled before the first size, so that no timed loop pays for it
    compiled, loop = _compiled_latency() if active else (None, "none (idle rank)")
    results, bad = [], []
    for size in sizes:
        iters, warm, bw_iters, bw_warm = _counts(params, size)
        window = _window(params, size)
        comm.Barrier()
        if not active:
            continue
        if params["validate"]:
            sendbuf[:size] = _pattern(size)
            recvbuf[:size] = 0
        samples = _latency(comm, rank, peer, sendbuf[:size], recvbuf[:size], iters, warm, compiled)
        if params["validate"] and rank == last and not np.array_equal(recvbuf[:size], _pattern(size)):
            bad.append(f"latency payload of {size} B corrupted")
        if params["validate"]:
            for slot in range(window):
                sendbuf[slot * size:(slot + 1) * size] = _pattern(size)
            recvbuf[:size * window] = 0
        elapsed = _bandwidth(comm, rank, peer, sendbuf, recvbuf, ack, size, window, bw_iters, bw_warm, MPI)
        if params["validate"] and rank == last:
            got = recvbuf[:size * window].reshape(window, size)
            if not (got == _pattern(size)).all():
                bad.append(f"bandwidth payload of {size} B corrupted")
        both = None
        if params.get("bidirectional"):
            if params["validate"]:
                recvbuf[:size * window] = 0
            both = _bidirectional(comm, peer, sendbuf, recvbuf, size, window, bw_iters, bw_warm, MPI)
            got = recvbuf[:size * window].reshape(window, size)
            if params["validate"] and not (got == _pattern(size)).all():
                bad.append(f"bidirectional payload of {size} B corrupted on rank {rank}")
        if rank == 0:
            half = np.sort(samples) * 1e6 / 2
            results.append({
                "bytes": size,
                "latency_us": float(half.mean()),
                "latency_min_us": float(half[0]),
                "latency_max_us": float(half[-1]),
                "latency_p50_us": percentile(half, 0.50),
                "latency_p99_us": percentile(half, 0.99),
                "bandwidth_mbps": size * window * bw_iters / elapsed / 1e6,
                **({"bibw_mbps": 2 * size * window * bw_iters / both / 1e6} if both else {}),
                "iterations": iters,
                "warmup": warm,
                "bw_iterations": bw_iters,
                "window": window,
            })
    gathered = comm.gather((bad, loop), root=0)
    if rank != 0:
        return None
    problems = [p for per_rank, _ in gathered for p in per_rank]
    loops = {gathered[0][1], gathered[last][1]}
    metrics = {"pair": [0, last], "sizes": results,
               "latency_loop": loops.pop() if len(loops) == 1 else f"rank 0: {gathered[0][1]}; "
                                                                   f"rank {last}: {gathered[last][1]}"}
    if problems:
        return metrics, {"passed": False, "detail": "; ".join(problems)}
    checked = "payloads checked" if params["validate"] else "payloads not checked (--validate)"
    return metrics, {"passed": bool(results), "detail": f"{len(results)} sizes measured; {checked}"}


def _latency(comm, rank, peer, send, recv, iters, warm, compiled=None):
    """Round-trip times of the timed iterations, seconds (rank 0; None elsewhere)."""
    if compiled is not None:
        return _latency_compiled(compiled, comm, rank, peer, send, recv, iters, warm)
    import numpy as np
    from mpi4py import MPI

    wtime = MPI.Wtime
    stamps = np.empty(iters + 1)
    sendspec, recvspec = [send, MPI.BYTE], [recv, MPI.BYTE]
    Send, Recv = comm.Send, comm.Recv
    if rank == 0:
        for _ in range(warm):
            Send(sendspec, peer, 1)
            Recv(recvspec, peer, 1)
        for i in range(iters):
            stamps[i] = wtime()
            Send(sendspec, peer, 1)
            Recv(recvspec, peer, 1)
        stamps[iters] = wtime()
        return np.diff(stamps)
    for _ in range(warm + iters):
        Recv(recvspec, peer, 1)
        Send(sendspec, peer, 1)
    return None


# The latency loop is where Python costs most: through mpi4py a blocking Send or Recv costs
# about 0.45 us of argument handling, allocation and GIL release on top of the MPI library
# (measured on a 2-core EPYC VM: 1.0 us per Send+Recv pair from Python, 0.11 us from C), so
# the interpreted loop reported 8-byte latencies about 0.9 us above C's. The compiled loop
# makes the same calls, MPI_Send, MPI_Recv and one MPI_Wtime stamp per round trip, straight
# into the MPI library mpi4py uses, and lands within a few tens of ns of C.

@functools.cache
def _compiled_latency():
    """(loops, "compiled") with the loops compiled and ready, or (None, "mpi4py: why not")."""
    try:
        return _build_compiled(), "compiled"
    except Exception as exc:  # no numba, an MPI whose handles we cannot pass: the mpi4py loop still works
        return None, f"mpi4py: compiled loop unavailable ({type(exc).__name__}: {exc})"


def _build_compiled():
    import ctypes

    import numpy as np
    from mpi4py import MPI

    from ._stream_loops import jit

    handles = {4: ctypes.c_int32, 8: ctypes.c_int64}  # MPICH: int handles; Open MPI: pointers
    comm_t, type_t = handles[MPI._sizeof(MPI.Comm)], handles[MPI._sizeof(MPI.Datatype)]
    c_int, ptr = ctypes.c_int, ctypes.c_void_p
    # dlsym through mpi4py's extension module finds the very MPI library it is linked to; an interposer preloaded
    # into the global scope (vnetbench --profile) defines MPI_Send there, and the calls go through it, as the
    # extension module's own calls do
    lib = ctypes.CDLL(MPI.__file__)
    here = ctypes.CDLL(None)
    lib = here if hasattr(here, "MPI_Send") else lib
    send = ctypes.CFUNCTYPE(c_int, ptr, c_int, type_t, c_int, c_int, comm_t)(("MPI_Send", lib))
    recv = ctypes.CFUNCTYPE(c_int, ptr, c_int, type_t, c_int, c_int, comm_t, ptr)(("MPI_Recv", lib))
    wtime = ctypes.CFUNCTYPE(ctypes.c_double)(("MPI_Wtime", lib))

    def ping(send, recv, wtime, sendp, recvp, count, dtype, comm, status, peer, warm, iters, stamps):
        err = 0
        for _ in range(warm):
            err |= send(sendp, count, dtype, peer, 1, comm)
            err |= recv(recvp, count, dtype, peer, 1, comm, status)
        for i in range(iters):
            stamps[i] = wtime()
            err |= send(sendp, count, dtype, peer, 1, comm)
            err |= recv(recvp, count, dtype, peer, 1, comm, status)
        stamps[iters] = wtime()
        return err

    def pong(send, recv, sendp, recvp, count, dtype, comm, status, peer, rounds):
        err = 0
        for _ in range(rounds):
            err |= recv(recvp, count, dtype, peer, 1, comm, status)
            err |= send(sendp, count, dtype, peer, 1, comm)
        return err

    ping, pong = (jit(_named_for_abi(loop, comm_t, type_t)) for loop in (ping, pong))
    status = np.zeros(MPI._sizeof(MPI.Status), dtype=np.uint8)
    # compile (or load from numba's cache) now: zero rounds send nothing
    ping(send, recv, wtime, 0, 0, 0, 0, 0, 0, 0, 0, 0, np.empty(1))
    pong(send, recv, 0, 0, 0, 0, 0, 0, 0, 0)
    return {"ping": ping, "pong": pong, "send": send, "recv": recv, "wtime": wtime, "status": status,
            "byte": MPI._handleof(MPI.BYTE)}


def _named_for_abi(loop, comm_t, type_t):
    """``loop`` named after the MPI ABI's handle types, so that numba keeps each ABI's compiled loop in a cache
    index of its own. One index holding both (int handles for MPICH, pointers for Open MPI) is not safe across
    processes: numba names a new entry's data file from the index as it read it, so two processes compiling the
    two ABIs at once (two MPIs' runs on one checkout or a shared home) both write data file 1 and the index keeps
    one of the two entries, pointing at whichever data was written last (shown with two processes compiling one
    cached function for two types)."""
    loop.__qualname__ = f"{loop.__qualname__}_{comm_t.__name__}_{type_t.__name__}"
    return loop


def _latency_compiled(c, comm, rank, peer, send, recv, iters, warm):
    import numpy as np
    from mpi4py import MPI

    args = (send.ctypes.data, recv.ctypes.data, send.size, c["byte"], MPI._handleof(comm), c["status"].ctypes.data,
            peer)
    if rank == 0:
        stamps = np.empty(iters + 1)
        err = c["ping"](c["send"], c["recv"], c["wtime"], *args, warm, iters, stamps)
    else:
        stamps = None
        err = c["pong"](c["send"], c["recv"], *args, warm + iters)
    if err:
        raise MPI.Exception(err)
    return None if stamps is None else np.diff(stamps)


def _bandwidth(comm, rank, peer, sendbuf, recvbuf, ack, size, window, iters, warm, MPI):
    """Seconds for `iters` windows of `window` messages, from the sender's clock."""
    if rank == 0:
        reqs = [comm.Send_init([sendbuf[i * size:(i + 1) * size], MPI.BYTE], peer, 2) for i in range(window)]
    else:
        reqs = [comm.Recv_init([recvbuf[i * size:(i + 1) * size], MPI.BYTE], peer, 2) for i in range(window)]
    ackspec = [ack, MPI.BYTE]

    def acknowledge():
        if rank == 0:
            comm.Recv(ackspec, peer, 3)
        else:
            comm.Send(ackspec, peer, 3)

    return _windows(reqs, iters, warm, MPI, acknowledge)


def _bidirectional(comm, peer, sendbuf, recvbuf, size, window, iters, warm, MPI):
    """Seconds for `iters` windows of `window` messages each way at once (both ranks post their receives and sends,
    then wait for all), from this rank's clock."""
    reqs = [comm.Recv_init([recvbuf[i * size:(i + 1) * size], MPI.BYTE], peer, 4) for i in range(window)]
    reqs += [comm.Send_init([sendbuf[i * size:(i + 1) * size], MPI.BYTE], peer, 4) for i in range(window)]
    return _windows(reqs, iters, warm, MPI)


def _windows(reqs, iters, warm, MPI, after=None):
    """Seconds for `iters` rounds of the persistent requests `reqs` (all started, all waited for, then `after`),
    timed after `warm` untimed rounds; the requests are freed."""
    start = 0.0
    for i in range(warm + iters):
        if i == warm:
            start = MPI.Wtime()
        MPI.Prequest.Startall(reqs)
        MPI.Request.Waitall(reqs)
        if after is not None:
            after()
    elapsed = MPI.Wtime() - start
    for req in reqs:
        req.Free()
    return elapsed


# --- what report, compare and plots read (kernels/contract.py) ---------------------------

SMOKE = ["--max-size", "4096", "--iterations", "100", "--large-iterations", "10", "--bw-iterations", "5",
         "--window", "4", "--bidirectional", "--validate"]


def _latency_at(size):
    from .contract import size_metric

    return size_metric("latency_us", "latency", "us", "lower")(size)


def _bandwidth_at(size):
    from .contract import size_metric

    return size_metric("bandwidth_mbps", "bandwidth", "MB/s", "higher")(size)


def _bibw_at(size):
    from .contract import size_metric

    return size_metric("bibw_mbps", "bidirectional bandwidth", "MB/s", "higher")(size)


def metrics(m):
    from .contract import per_size

    both = per_size(m, "bibw_mbps", _bibw_at) if any("bibw_mbps" in r for r in m.get("sizes") or []
                                                     if isinstance(r, dict)) else []
    return per_size(m, "latency_us", _latency_at) + per_size(m, "bandwidth_mbps", _bandwidth_at) + both


def table(names):
    from .contract import smallest_and_largest

    return smallest_and_largest("latency_us", "bandwidth_mbps")(names)


def headline(m):
    from .contract import ends

    small, large = ends(m)
    return [(f"latency us @{small.get('bytes', '?')}B", small.get("latency_us")),
            (f"MB/s @{large.get('bytes', '?')}B", large.get("bandwidth_mbps"))]


SIZE_COLUMNS = {"bytes": "size (B)", "latency_us": "latency us", "latency_min_us": "min us",
                "latency_max_us": "max us", "latency_p50_us": "p50 us", "latency_p99_us": "p99 us",
                "bandwidth_mbps": "MB/s", "iterations": "iterations"}


def size_rows(m):
    from .contract import size_table

    return size_table(m, SIZE_COLUMNS)


def _osu():
    from .contract import OsuColumn, OsuLayout

    return (OsuLayout("OSU MPI Latency Test", "MPI_CHAR", (OsuColumn("Avg Latency(us)", "latency_us"),)),
            OsuLayout("OSU MPI Bandwidth Test", "MPI_CHAR", (OsuColumn("Bandwidth (MB/s)", "bandwidth_mbps"),)))


OSU = _osu()
