"""The molecular-dynamics communication pattern: compute, 26-neighbour halo exchange, Allreduce.

Ranks own blocks of a periodic 3D grid of float64 cells on a Cartesian communicator. Each
step: relax the owned cells (``--compute`` passes), swap boundary layers with every
neighbour through persistent requests, and every ``--reduce-every`` steps sum an energy over
all ranks. Every ghost value is a stamp ``(step * nranks + sender) * G + global index`` and
every message is checked against what the receiver derives from geometry alone.

numpy and MPI are imported by the functions that use them: the launcher, report and compare import this
module for its options and metrics, and must start fast.
"""

import argparse
import os

from vnetbench.core.errors import UsageError
from vnetbench.core.options import int_range

from .stream import check_memory

DESCRIPTION = "MD-like halo exchange on a periodic 3D grid: compute, 26 (or 6) neighbours, Allreduce"
MIN_RANKS = 1
DEFAULT_GRID = (102, 102, 102)  # 1,061,208 cells, about the study's 1,066,628 atoms
EXACT = 2 ** 53  # float64 holds every whole number below this
AXES = "xyz"
FACES = [(-1, 0, 0), (1, 0, 0), (0, -1, 0), (0, 1, 0), (0, 0, -1), (0, 0, 1)]


def grid(text: str) -> tuple[int, int, int]:
    """argparse type: 'NX,NY,NZ' or one number for a cube, each >= 1."""
    parts = text.split(",")
    try:
        values = tuple(int(part) for part in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not NX,NY,NZ (three whole numbers)") from None
    if len(values) == 1:
        values *= 3
    if len(values) != 3 or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed; use NX,NY,NZ with each >= 1")
    return values


def add_arguments(parser):
    parser.add_argument("--global", dest="global_grid", type=grid, default=DEFAULT_GRID, metavar="NX,NY,NZ",
                        help="cells of the whole periodic domain (default 102,102,102: about a "
                             "million, like the study's 1,066,628 atoms)")
    parser.add_argument("--weak", action="store_true",
                        help="weak scaling: --global is each rank's block, and the domain grows "
                             "with the process grid")
    parser.add_argument("--steps", type=int_range(1, 10**8), default=500, help="time steps (default 500)")
    parser.add_argument("--compute", type=int_range(0, 10**4), default=1, metavar="K",
                        help="relaxation passes over the owned cells per step (default 1: about a "
                             "ns per cell, twice the exchange at the default grid on 2 ranks; 0 = "
                             "communication only)")
    parser.add_argument("--neighbours", type=int, choices=(6, 26), default=26,
                        help="exchange with faces only (6) or faces, edges and corners (26, default)")
    parser.add_argument("--halo-width", type=int_range(1, 64), default=1,
                        help="ghost layers exchanged, cells (default 1)")
    parser.add_argument("--reduce-every", type=int_range(1), default=1, metavar="N",
                        help="Allreduce the energy every N steps (default 1)")
    parser.add_argument("--corrupt-step", type=int_range(0), default=None, metavar="S",
                        help="self-test: rank 0 alters one value it sends at step S; the run "
                             "must come out invalid")


# --- geometry: pure functions, shared by check() and the ranks ---

def greedy_dims(nranks: int) -> list[int]:
    """MPI_Dims_create(nranks, 3) as Open MPI computes it: largest prime factors first, each
    onto the smallest dimension, then sorted descending."""
    factors, rest, prime = [], nranks, 2
    while prime * prime <= rest:
        while rest % prime == 0:
            factors.append(prime)
            rest //= prime
        prime += 1
    if rest > 1:
        factors.append(rest)
    dims = [1, 1, 1]
    for factor in sorted(factors, reverse=True):
        dims[dims.index(min(dims))] *= factor
    return sorted(dims, reverse=True)


def process_dims(nranks: int) -> list[int]:
    # on the ranks MPI is up, so ask the library that will lay the grid out; the launcher
    # must not initialise MPI and uses the same algorithm in Python
    import sys

    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized():
        return list(mpi.Compute_dims(nranks, 3))
    return greedy_dims(nranks)


def global_grid(params, dims) -> tuple[int, ...]:
    given = tuple(params["global_grid"])
    return tuple(g * d for g, d in zip(given, dims)) if params["weak"] else given


def block(total: int, parts: int, coord: int) -> tuple[int, int]:
    """(first cell, cells) of part ``coord`` when ``total`` cells split into ``parts``."""
    size, extra = divmod(total, parts)
    return coord * size + min(coord, extra), size + (coord < extra)


def directions(neighbours: int) -> list[tuple[int, int, int]]:
    """Neighbour offsets, faces first (the boundary slabs a rank stamps), then edges, corners."""
    if neighbours == 6:
        return list(FACES)
    rest = [(x, y, z) for x in (-1, 0, 1) for y in (-1, 0, 1) for z in (-1, 0, 1)
            if (x, y, z) != (0, 0, 0) and (x, y, z) not in FACES]
    return FACES + sorted(rest, key=lambda d: sum(map(abs, d)))


def direction_name(offset) -> str:
    return "".join(f"{'-+'[o > 0]}{axis}" for o, axis in zip(offset, AXES) if o)


def send_region(offset, size, h) -> list[int]:
    """The owned cells the neighbour at ``offset`` needs, in padded coordinates."""
    bounds = {-1: lambda n: (h, 2 * h), 0: lambda n: (h, h + n), 1: lambda n: (n, n + h)}
    return [b for o, n in zip(offset, size) for b in bounds[o](n)]


def recv_region(offset, size, h) -> list[int]:
    """The ghost cells the neighbour at ``offset`` fills, in padded coordinates."""
    bounds = {-1: lambda n: (0, h), 0: lambda n: (h, h + n), 1: lambda n: (h + n, 2 * h + n)}
    return [b for o, n in zip(offset, size) for b in bounds[o](n)]


def region_cells(region) -> int:
    return (region[1] - region[0]) * (region[3] - region[2]) * (region[5] - region[4])


def expected_indices(offset, origin, size, h, gdims) -> "np.ndarray":
    """Global linear indices of the ghost cells from ``offset``, in unpacking order (wrapped)."""
    import numpy as np

    x0, x1, y0, y1, z0, z1 = recv_region(offset, size, h)
    gx = (origin[0] - h + np.arange(x0, x1, dtype=np.int64)) % gdims[0]
    gy = (origin[1] - h + np.arange(y0, y1, dtype=np.int64)) % gdims[1]
    gz = (origin[2] - h + np.arange(z0, z1, dtype=np.int64)) % gdims[2]
    return ((gx[:, None, None] * gdims[1] + gy[None, :, None]) * gdims[2] + gz[None, None, :]).ravel()


# --- the kernel interface ---

def check(params, ranks):
    for option, key, lower in (("--steps", "steps", 1), ("--compute", "compute", 0),
                               ("--halo-width", "halo_width", 1), ("--reduce-every", "reduce_every", 1)):
        value = params[key]
        if not _whole(value) or value < lower:
            raise UsageError(f"{option}: {value!r} is not allowed; use a whole number >= {lower}")
    if params["neighbours"] not in (6, 26):
        raise UsageError(f"--neighbours: {params['neighbours']!r} is not allowed; choose 6 or 26")
    given = params["global_grid"]
    if not isinstance(given, (list, tuple)) or len(given) != 3 or not all(_whole(n) and n >= 1 for n in given):
        raise UsageError(f"--global: {given!r} is not allowed; use NX,NY,NZ with each >= 1")
    dims = process_dims(ranks)
    gdims = global_grid(params, dims)
    h, steps = params["halo_width"], params["steps"]
    for axis, total, parts in zip(AXES, gdims, dims):
        smallest = total // parts
        if smallest < h:
            raise UsageError(f"--global: {','.join(map(str, gdims))} cells over a {'x'.join(map(str, dims))} "
                             f"process grid leaves blocks {smallest} cells thick along {axis}, thinner than "
                             f"--halo-width {h}; allowed: at least {h * parts} cells along {axis} "
                             f"for {ranks} ranks")
    cells = gdims[0] * gdims[1] * gdims[2]
    if steps * ranks * cells > EXACT:
        raise UsageError(f"--steps: {steps} steps x {ranks} ranks x {cells} cells reaches 2^53, so ghost "
                         f"stamps would not be exact in float64; allowed: at most "
                         f"{EXACT // (ranks * cells)} steps for this --global and rank count")
    corrupt = params["corrupt_step"]
    if corrupt is not None and (not _whole(corrupt) or not 0 <= corrupt < steps):
        raise UsageError(f"--corrupt-step: {corrupt!r} is not allowed; use 0 to {steps - 1} (within --steps)")
    largest = [-(-total // parts) + 2 * h for total, parts in zip(gdims, dims)]
    # the block with its ghosts, and send and receive buffers that are at most as large again
    check_memory("--global", 16 * largest[0] * largest[1] * largest[2], ranks,
                 f"a {'x'.join(map(str, largest))} block with ghosts and buffers")


def default_timeout(params, ranks):
    dims = process_dims(ranks)
    gdims = global_grid(params, dims)
    cells = 1
    for total, parts in zip(gdims, dims):
        cells *= -(-total // parts) + 2 * params["halo_width"]
    # pessimistic: 20 ns per cell per pass, a millisecond of messaging, and ranks sharing cores
    per_step = cells * (params["compute"] + 2) * 20e-9 + 1e-3
    crowding = max(1.0, ranks / (os.cpu_count() or 1))
    return 120.0 + params["steps"] * per_step * crowding


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --- the rank side ---

def run(comm, params):
    from mpi4py import MPI

    from . import _halo_loops as loops

    loops.warm_up()  # compile before anything is timed
    dims = list(MPI.Compute_dims(comm.Get_size(), 3))
    # no reordering: cart ranks are world ranks, so rank 0 still writes the record
    cart = comm.Create_cart(dims, periods=[True] * 3, reorder=False)
    try:
        layout = Layout(params, dims, cart.Get_coords(cart.Get_rank()), cart.Get_cart_rank)
        exchange = _Exchange(cart, layout, MPI)
        try:
            outcome = _steps(cart, layout, exchange, params, loops, MPI)
        finally:
            exchange.free()
        return _report(cart, layout, params, *outcome, MPI)
    finally:
        cart.Free()


class Layout:
    """What one rank derives from the geometry alone: its block, its neighbours, where each
    message lives in the buffers, and what each received message must hold. No MPI here, so
    tests can lay out every rank of a grid in one process."""

    def __init__(self, params, dims, coords, rank_of):
        import numpy as np

        h = params["halo_width"]
        self.dims, self.coords, self.h = list(dims), list(coords), h
        self.nranks = dims[0] * dims[1] * dims[2]
        self.rank = rank_of(coords)
        self.gdims = np.array(global_grid(params, dims), dtype=np.int64)
        self.ncells = int(self.gdims.prod())
        spans = [block(total, parts, c) for total, parts, c in zip(self.gdims.tolist(), dims, coords)]
        self.origin = np.array([first for first, _ in spans], dtype=np.int64)
        self.size = [cells for _, cells in spans]
        self.offsets = directions(params["neighbours"])
        self.neighbours = [rank_of([(c + o) % d for c, o, d in zip(coords, offset, dims)])
                           for offset in self.offsets]
        self.sources = np.array(self.neighbours, dtype=np.int64)
        # the message towards offset o carries tag index(o); the neighbour at o sends us its
        # message towards -o, so we receive with tag index(-o): when one rank is the neighbour
        # in several directions (grids 1 or 2 ranks wide), the tags still pair them correctly
        index = {offset: i for i, offset in enumerate(self.offsets)}
        self.recv_tags = [index[tuple(-o for o in offset)] for offset in self.offsets]
        self.send_regions = np.array([send_region(o, self.size, h) for o in self.offsets], dtype=np.int64)
        self.recv_regions = np.array([recv_region(o, self.size, h) for o in self.offsets], dtype=np.int64)
        self.counts = [region_cells(region) for region in self.send_regions]
        self.buf_offsets = np.concatenate([[0], np.cumsum(self.counts)]).astype(np.int64)
        self._expect()

    def _expect(self):
        import numpy as np

        # numpy's uint64 arithmetic wraps mod 2^64 exactly as the unpacking loop's does
        sums, ordered, firsts, lasts = [], [], [], []
        for offset in self.offsets:
            indices = expected_indices(offset, self.origin, self.size, self.h, self.gdims).astype(np.uint64)
            weights = np.arange(1, indices.size + 1, dtype=np.uint64)
            sums.append(indices.sum(dtype=np.uint64))
            ordered.append((weights * indices).sum(dtype=np.uint64))
            firsts.append(float(indices[0]))
            lasts.append(float(indices[-1]))
        self.sums = np.array(sums, dtype=np.uint64)
        self.ordered_sums = np.array(ordered, dtype=np.uint64)
        self.firsts = np.array(firsts)
        self.lasts = np.array(lasts)

    def stamp_base(self, step: int) -> int:
        return (step * self.nranks + self.rank) * self.ncells

    def describe(self, message: int) -> str:
        return (f"message from rank {self.neighbours[message]} (direction "
                f"{direction_name(self.offsets[message])}, {self.counts[message]} values)")


class _Exchange:
    """A rank's block with ghosts, its send and receive buffers, and persistent requests."""

    def __init__(self, cart, layout, MPI):
        import numpy as np

        self.field = np.zeros([n + 2 * layout.h for n in layout.size])
        self.sendbuf = np.zeros(layout.buf_offsets[-1])
        self.recvbuf = np.full(layout.buf_offsets[-1], np.nan)  # NaN is never a stamp: nothing stale passes
        self.recvs, self.sends = [], []
        for i, neighbour in enumerate(layout.neighbours):
            lo, hi = layout.buf_offsets[i], layout.buf_offsets[i + 1]
            self.recvs.append(cart.Recv_init([self.recvbuf[lo:hi], MPI.DOUBLE], neighbour, layout.recv_tags[i]))
            self.sends.append(cart.Send_init([self.sendbuf[lo:hi], MPI.DOUBLE], neighbour, i))
        self.both = self.recvs + self.sends

    def free(self):
        for request in self.both:
            request.Free()


def _steps(cart, layout, exchange, params, loops, MPI):
    """Run the time steps: (timestamps per step, elapsed s, first bad message or None, bad sums, energy)."""
    from time import perf_counter as clock

    import numpy as np

    steps, passes, every = params["steps"], params["compute"], params["reduce_every"]
    corrupt = params["corrupt_step"] if layout.rank == 0 else None
    corrupt_at = layout.counts[0] // 2  # mid-message, where only the checksums can see it
    field, h, sendbuf, recvbuf = exchange.field, layout.h, exchange.sendbuf, exchange.recvbuf
    compute, stamp_pack, unpack_check = loops.compute, loops.stamp_pack, loops.unpack_check
    startall, waitall = MPI.Prequest.Startall, MPI.Request.Waitall
    recvs, sends, both = exchange.recvs, exchange.sends, exchange.both
    allreduce, SUM = cart.Allreduce, MPI.SUM
    # the energy and a 1 from every rank: the second sum proves each reduction complete
    partial, reduced = np.zeros(2), np.zeros(2)
    stamps, failure, bad_reductions, energy, local_energy = [], None, 0, 0.0, 0.0
    cart.Barrier()
    begin = clock()
    for step in range(steps):
        t0 = clock()
        if passes:
            local_energy = compute(field, h, passes)
        t1 = clock()
        startall(recvs)  # receives posted before packing, so no message arrives unexpected
        stamp_pack(field, sendbuf, len(FACES), layout.send_regions, layout.buf_offsets,
                   layout.origin, layout.gdims, h, layout.stamp_base(step))
        if step == corrupt:
            sendbuf[corrupt_at] += 1.0
        startall(sends)
        waitall(both)
        message, what = unpack_check(field, recvbuf, layout.recv_regions, layout.buf_offsets,
                                     layout.sources, step, layout.nranks, layout.ncells, layout.sums,
                                     layout.ordered_sums, layout.firsts, layout.lasts)
        if message >= 0 and failure is None:
            failure = (step, message, what)
        t2 = clock()
        if (step + 1) % every == 0:
            partial[0], partial[1] = local_energy, 1.0
            allreduce(partial, reduced, SUM)
            energy = float(reduced[0])
            if reduced[1] != layout.nranks:
                bad_reductions += 1
        stamps.append((t0, t1, t2, clock()))
    elapsed = clock() - begin
    return np.array(stamps).reshape(steps, 4), elapsed, failure, bad_reductions, energy


def _report(cart, layout, params, stamps, elapsed, failure, bad_reductions, energy, MPI):
    import numpy as np

    steps = stamps.shape[0]
    per_step = np.empty(steps)
    cart.Allreduce(np.ascontiguousarray(stamps[:, 3] - stamps[:, 0]), per_step, op=MPI.MAX)
    phases = np.diff(stamps, axis=1).sum(axis=0)  # compute, exchange, reduce
    slowest = np.empty(4)
    cart.Allreduce(np.concatenate([[elapsed], phases]), slowest, op=MPI.MAX)
    failed = None
    if failure is not None:
        step, message, what = failure
        text = f"rank {layout.rank}: {layout.describe(message)} at step {step}: {WHAT[what]}"
        failed = (step, layout.rank, text)
    own = {"rank": layout.rank, "size": layout.size, "bytes": 8 * int(layout.buf_offsets[-1]),
           "failed": failed, "bad_reductions": bad_reductions}
    everyone = cart.gather(own, root=0)
    if layout.rank != 0:
        return None
    cells = [entry["size"][0] * entry["size"][1] * entry["size"][2] for entry in everyone]
    reductions = steps // params["reduce_every"]
    metrics = {
        "elapsed_s": float(slowest[0]),
        "step_s": {"median": float(np.median(per_step)), "min": float(per_step.min()),
                   "max": float(per_step.max()), "mean": float(per_step.mean()),
                   "samples": per_step.tolist()},
        "compute_s": float(slowest[1]),
        "exchange_s": float(slowest[2]),
        "reduce_s": float(slowest[3]),
        "bytes_per_rank_per_step": max(entry["bytes"] for entry in everyone),
        "messages_per_rank_per_step": len(layout.offsets),
        "dims": layout.dims,
        "local_grid": layout.size,
        "local_cells": {"min": min(cells), "max": max(cells)},
        "global_grid": layout.gdims.tolist(),
        "steps": steps,
        "weak": params["weak"],
        "halo_width": layout.h,
        "neighbours": len(layout.offsets),
        "compute_passes": params["compute"],
        "reductions": reductions,
        "energy": energy if np.isfinite(energy) else None,  # JSON has no NaN
    }
    return metrics, _verdict(everyone, len(layout.offsets), steps, reductions)


# unpack_check's verdicts (codes from _halo_loops, which only ranks import)
WHAT = {1: "a value that is no stamp of that sender and step (wrong, stale or missing)",
        2: "checksum differs", 3: "values out of order", 4: "first value differs", 5: "last value differs"}


def _verdict(everyone, messages, steps, reductions) -> dict:
    failed = sorted((entry["failed"] for entry in everyone if entry["failed"]))
    problems = []
    if failed:
        more = f" (and {len(failed) - 1} more ranks)" if len(failed) > 1 else ""
        problems.append(failed[0][2] + more)
    short = [entry["rank"] for entry in everyone if entry["bad_reductions"]]
    if short:
        problems.append(f"ranks {short}: an Allreduce did not sum a 1 from every rank")
    if problems:
        return {"passed": False, "detail": "; ".join(problems)}
    return {"passed": True,
            "detail": f"{messages} messages x {steps} steps checked on each of {len(everyone)} ranks "
                      f"(stamps, checksums, order, first and last values); {reductions} reductions "
                      f"complete"}


# --- what report, compare and plots read (kernels/contract.py) ---------------------------

SMOKE = ["--global", "16,16,16", "--steps", "5"]


def metrics(m):
    from .contract import Metric

    step = m.get("step_s") if isinstance(m.get("step_s"), dict) else {}
    return [(Metric("elapsed_s", "elapsed", "s", "lower", scaling=True), m.get("elapsed_s")),
            (Metric("step_s.median", "median step", "s", "lower"), step.get("median")),
            (Metric("compute_s", "compute", "s", "lower"), m.get("compute_s")),
            (Metric("exchange_s", "halo exchange", "s", "lower"), m.get("exchange_s")),
            (Metric("reduce_s", "reduction", "s", "lower"), m.get("reduce_s"))]


def table(names):
    return [name for name in ("elapsed_s",) if name in names]


def headline(m):
    step = m.get("step_s") if isinstance(m.get("step_s"), dict) else {}
    median = step.get("median")
    return [("elapsed s", m.get("elapsed_s")),
            ("step median ms", median * 1e3 if isinstance(median, (int, float)) else None),
            ("exchange s", m.get("exchange_s")), ("reduce s", m.get("reduce_s"))]
