"""The halo kernel's per-step work, compiled with numba: one call per phase keeps Python off the
critical path (a step must cost what the same pattern costs in C).

A region is a row ``x0, x1, y0, y1, z0, z1`` of half-open bounds into the rank's padded
block (ghosts included); ``offsets[m]:offsets[m + 1]`` is message m's slice of the buffer.
Every loop walks a region in the same order (x, then y, then z fastest), so the k-th value a
sender packs is the k-th value the receiver unpacks.

The loops index the flattened block with unsigned integers: numba then skips the
negative-index wraparound it applies to every signed access, which made packing 40% slower
than C and the compute sweep four times slower.
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
    sy, sz = uint64(field.shape[1]), uint64(field.shape[2])
    plane, one = sy * sz, uint64(1)
    flat = field.reshape(-1)
    row = np.empty(field.shape[2])
    energy = 0.0
    for _ in range(passes):
        for i in range(h, h + nx):
            for j in range(h, h + ny):
                at = (uint64(i) * sy + uint64(j)) * sz
                for k in range(uint64(h), uint64(h + nz)):
                    c = at + k
                    around = (flat[c - plane] + flat[c + plane] + flat[c - sz] + flat[c + sz]
                              + flat[c - one] + flat[c + one])
                    row[k] = 0.5 * flat[c] + around * (1.0 / 12.0)
                for k in range(uint64(h), uint64(h + nz)):
                    flat[at + k] = row[k]
                    energy += row[k]
    return energy / max(1, nx * ny * nz)


@jit
def stamp_pack(field, sendbuf, stamped, regions, offsets, origin, gdims, h, base):
    """Pack every message; the first ``stamped`` regions (the face slabs) are stamped as packed.

    A stamp is base + the cell's global index. Every edge and corner region lies inside a
    face slab, so it is packed from cells already stamped this step.
    """
    gy, gz = gdims[1], gdims[2]
    ny, nz = uint64(field.shape[1]), uint64(field.shape[2])
    flat = field.reshape(-1)
    for m in range(regions.shape[0]):
        x0, x1, y0, y1, z0, z1 = regions[m]
        pos = uint64(offsets[m])
        run = uint64(z1 - z0)
        for i in range(x0, x1):
            row = (origin[0] + i - h) * gy
            for j in range(y0, y1):
                at = (uint64(i) * ny + uint64(j)) * nz + uint64(z0)
                if m < stamped:
                    first = (row + origin[1] + j - h) * gz + origin[2] - h + z0 + base
                    for k in range(run):
                        value = float(first + int64(k))
                        flat[at + k] = value
                        sendbuf[pos + k] = value
                else:
                    for k in range(run):
                        sendbuf[pos + k] = flat[at + k]
                pos += run


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
    ny, nz = uint64(field.shape[1]), uint64(field.shape[2])
    flat = field.reshape(-1)
    for m in range(regions.shape[0]):
        x0, x1, y0, y1, z0, z1 = regions[m]
        base = float((step * nranks + sources[m]) * ncells)
        start = uint64(offsets[m])
        pos = start
        run = uint64(z1 - z0)
        total = uint64(0)
        ordered = uint64(0)
        strange = False
        for i in range(x0, x1):
            for j in range(y0, y1):
                at = (uint64(i) * ny + uint64(j)) * nz + uint64(z0)
                for k in range(run):
                    value = recvbuf[pos]
                    flat[at + k] = value
                    # clamp before converting, to half-way values no whole index has: NaN (a
                    # value never sent) and anything out of range are then caught as fractions
                    index = value - base
                    index = index if index >= 0.0 else -0.5
                    index = index if index < top else top + 0.5
                    whole = int64(index)
                    strange |= float(whole) != index
                    total += uint64(whole)
                    pos += uint64(1)
                    ordered += (pos - start) * uint64(whole)
        what = OK
        if strange:
            what = NOT_A_STAMP
        elif total != sums[m]:
            what = CHECKSUM
        elif ordered != ordered_sums[m]:
            what = ORDER
        elif recvbuf[start] - base != firsts[m]:
            what = FIRST
        elif recvbuf[pos - uint64(1)] - base != lasts[m]:
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
