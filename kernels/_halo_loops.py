"""The halo kernel's per-step work, compiled with numba: one call per phase keeps Python off the
critical path (a step must cost what the same pattern costs in C).

A region is a row ``x0, x1, y0, y1, z0, z1`` of half-open bounds into the rank's padded
block (ghosts included); ``offsets[m]:offsets[m + 1]`` is message m's slice of the buffer.
Every loop walks a region in the same order (x, then y, then z fastest), so the k-th value a
sender packs is the k-th value the receiver unpacks.
"""

import numpy as np
from numba import int64, uint64

from ._stream_loops import jit

# what unpack_check found wrong with a message; halo.py turns these into words
OK, NOT_A_STAMP, CHECKSUM, ORDER, FIRST, LAST = range(6)


# reassociation lets the sweep and its energy sum vectorise; the energy is reported, never
# checked, and the ghost checks below stay exact
@jit(fastmath={"reassoc", "contract", "arcp", "nsz"})
def compute(field, h, passes):
    """``passes`` relaxation sweeps over the owned cells, in place; returns an energy.

    Each cell becomes half itself plus a twelfth of its six neighbours, ghosts included,
    as a force computation reads neighbours' atoms; a row is computed from old values, then
    written back, so the inner loop vectorises. Convex combinations: values stay bounded.
    """
    nx, ny, nz = field.shape[0] - 2 * h, field.shape[1] - 2 * h, field.shape[2] - 2 * h
    row = np.empty(field.shape[2])
    energy = 0.0
    for _ in range(passes):
        for i in range(h, h + nx):
            for j in range(h, h + ny):
                for k in range(h, h + nz):
                    around = (field[i - 1, j, k] + field[i + 1, j, k] + field[i, j - 1, k]
                              + field[i, j + 1, k] + field[i, j, k - 1] + field[i, j, k + 1])
                    row[k] = 0.5 * field[i, j, k] + around * (1.0 / 12.0)
                for k in range(h, h + nz):
                    field[i, j, k] = row[k]
                    energy += row[k]
    return energy / max(1, nx * ny * nz)


@jit
def stamp_pack(field, sendbuf, stamped, regions, offsets, origin, gdims, h, base):
    """Pack every message; the first ``stamped`` regions (the face slabs) are stamped as packed.

    A stamp is base + the cell's global index. Every edge and corner region lies inside a
    face slab, so it is packed from cells already stamped this step.
    """
    gy, gz = gdims[1], gdims[2]
    for m in range(regions.shape[0]):
        x0, x1, y0, y1, z0, z1 = regions[m]
        pos = offsets[m]
        if m < stamped:
            for i in range(x0, x1):
                row = (origin[0] + i - h) * gy
                for j in range(y0, y1):
                    line = (row + origin[1] + j - h) * gz + origin[2] - h + base
                    for k in range(z0, z1):
                        value = float(line + k)
                        field[i, j, k] = value
                        sendbuf[pos] = value
                        pos += 1
        else:
            for i in range(x0, x1):
                for j in range(y0, y1):
                    for k in range(z0, z1):
                        sendbuf[pos] = field[i, j, k]
                        pos += 1


@jit
def unpack_check(field, recvbuf, regions, offsets, sources, step, nranks, ncells,
                 sums, ordered_sums, firsts, lasts):
    """Unpack every message into the ghosts and check it; (message, what) of the first bad one.

    Each value minus its sender's stamp base must be a whole global index below ``ncells``;
    the indices' sum and position-weighted sum (mod 2^64, so nothing can overflow) must equal
    what the receiver computed from geometry, and the first and last must match exactly.
    Returns (-1, OK) when all messages are right.
    """
    bad_message, bad_what = -1, OK
    top = float(ncells)
    for m in range(regions.shape[0]):
        x0, x1, y0, y1, z0, z1 = regions[m]
        base = float((step * nranks + sources[m]) * ncells)
        start = offsets[m]
        pos = start
        total = uint64(0)
        ordered = uint64(0)
        strange = False
        for i in range(x0, x1):
            for j in range(y0, y1):
                for k in range(z0, z1):
                    value = recvbuf[pos]
                    field[i, j, k] = value
                    # clamp before converting, to half-way values no whole index has: NaN (a
                    # value never sent) and anything out of range are then caught as fractions
                    index = value - base
                    index = index if index >= 0.0 else -0.5
                    index = index if index < top else top + 0.5
                    whole = int64(index)
                    strange |= float(whole) != index
                    total += uint64(whole)
                    ordered += uint64(pos - start + 1) * uint64(whole)
                    pos += 1
        what = OK
        if strange:
            what = NOT_A_STAMP
        elif total != sums[m]:
            what = CHECKSUM
        elif ordered != ordered_sums[m]:
            what = ORDER
        elif recvbuf[start] - base != firsts[m]:
            what = FIRST
        elif recvbuf[pos - 1] - base != lasts[m]:
            what = LAST
        if what != OK and bad_message < 0:
            bad_message, bad_what = m, what
    return bad_message, bad_what


def warm_up() -> None:
    """Compile (or load from cache) every function with the types the kernel passes."""
    field = np.zeros((3, 3, 3))
    regions = np.array([[1, 2, 1, 2, 1, 2]], dtype=np.int64)
    offsets = np.array([0, 1], dtype=np.int64)
    buf = np.zeros(1)
    three = np.zeros(3, dtype=np.int64)
    compute(field, 1, 1)
    stamp_pack(field, buf, 1, regions, offsets, three, np.ones(3, dtype=np.int64), 1, 0)
    unpack_check(field, buf, regions, offsets, np.zeros(1, dtype=np.int64), 0, 1, 1,
                 np.zeros(1, dtype=np.uint64), np.zeros(1, dtype=np.uint64), np.zeros(1), np.zeros(1))
