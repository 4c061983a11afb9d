"""The md kernel's per-step work, compiled with numba: lattice, Lennard-Jones forces over a Verlet
list, cell-binned list builds, velocity-Verlet integration, and packing of ghost and migrating atoms.

Units are reduced Lennard-Jones units (sigma = epsilon = mass = 1). Arrays: ``x``, ``v``, ``f``
are ``(n, 3)`` float64, local atoms first (``nlocal``), then ghosts. The neighbour list is
"half": each pair once, Newton's third law applied. With ``newton`` (LAMMPS's default) a pair
with a ghost is kept by one of the two ranks only (the one whose atom is below the other in
z, y, x order) and the force on the ghost travels back to its owner; without, both ranks keep
it and count half its energy, and nothing travels back (miniMD's ``newton off``). Imported only
by ranks: importing numba is slow.
"""

import math

import numpy as np

from ._stream_loops import jit

BASIS = np.array([[0.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.5, 0.0, 0.5], [0.0, 0.5, 0.5]])


@jit
def _splitmix(z):
    # splitmix64: a counter-based generator, so an atom's velocity depends on its id and the
    # seed only, never on which rank made it: the same start at any rank count
    z = (z + np.uint64(0x9E3779B97F4A7C15))
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@jit
def lattice(cells, a, lo, hi, seed, basis):
    """The fcc sites of ``cells`` unit cells (edge ``a``) inside ``[lo, hi)``: (x, v, ids).

    v is uniform in [-0.5, 0.5) per component, from the seed and the atom's global id."""
    count = 0
    ranges = np.empty((3, 2), dtype=np.int64)
    for d in range(3):
        ranges[d, 0] = max(0, int(np.floor(lo[d] / a)) - 1)
        ranges[d, 1] = min(cells[d], int(np.ceil(hi[d] / a)) + 1)
    cap = 4
    for d in range(3):
        cap *= ranges[d, 1] - ranges[d, 0]
    x = np.empty((cap, 3))
    v = np.empty((cap, 3))
    ids = np.empty(cap, dtype=np.int64)
    scale = 1.0 / 18446744073709551616.0
    for i in range(ranges[0, 0], ranges[0, 1]):
        for j in range(ranges[1, 0], ranges[1, 1]):
            for k in range(ranges[2, 0], ranges[2, 1]):
                for b in range(4):
                    p0 = (i + basis[b, 0]) * a
                    p1 = (j + basis[b, 1]) * a
                    p2 = (k + basis[b, 2]) * a
                    if lo[0] <= p0 < hi[0] and lo[1] <= p1 < hi[1] and lo[2] <= p2 < hi[2]:
                        gid = ((i * cells[1] + j) * cells[2] + k) * 4 + b
                        x[count, 0], x[count, 1], x[count, 2] = p0, p1, p2
                        for d in range(3):
                            key = np.uint64(seed) * np.uint64(0x100000001B3) + np.uint64(3 * gid + d)
                            v[count, d] = float(_splitmix(key)) * scale - 0.5
                        ids[count] = gid
                        count += 1
    return x[:count].copy(), v[:count].copy(), ids[:count].copy()


@jit
def integrate_first(x, v, f, nlocal, dt):
    """The first half of velocity Verlet: a half kick and a drift."""
    half = 0.5 * dt
    for i in range(nlocal):
        for d in range(3):
            v[i, d] += half * f[i, d]
            x[i, d] += dt * v[i, d]


@jit
def integrate_second(v, f, nlocal, dt):
    half = 0.5 * dt
    for i in range(nlocal):
        for d in range(3):
            v[i, d] += half * f[i, d]


@jit
def kinetic(v, nlocal):
    """(kinetic energy, px, py, pz) of the local atoms."""
    ke, px, py, pz = 0.0, 0.0, 0.0, 0.0
    for i in range(nlocal):
        ke += v[i, 0] * v[i, 0] + v[i, 1] * v[i, 1] + v[i, 2] * v[i, 2]
        px += v[i, 0]
        py += v[i, 1]
        pz += v[i, 2]
    return 0.5 * ke, px, py, pz


@jit
def build(x, nlocal, ntotal, lo, hi, reach, neigh, numneigh, start, newton):
    """Verlet list of the local atoms: partners within ``reach`` (cutoff + skin), found through
    bins at least half of ``reach`` wide covering the sub-domain and its ghost shell (as LAMMPS
    bins: the 5x5x5 bins around an atom's hold 42% fewer candidates than 3x3x3 bins of a whole
    ``reach``).

    Fills ``neigh`` (flat), ``start`` and ``numneigh``; returns the pairs stored, or -needed when
    ``neigh`` is too small (the caller grows it and builds again)."""
    nb = np.empty(3, dtype=np.int64)
    width = np.empty(3)
    origin = np.empty(3)
    for d in range(3):
        span = hi[d] - lo[d] + 2.0 * reach
        nb[d] = max(1, int(span / (0.5 * reach)))
        width[d] = span / nb[d]
        origin[d] = lo[d] - reach
    nbins = nb[0] * nb[1] * nb[2]
    head = np.full(nbins, -1, dtype=np.int64)
    nxt = np.empty(ntotal, dtype=np.int64)
    binof = np.empty(ntotal, dtype=np.int64)
    for i in range(ntotal - 1, -1, -1):
        cx = min(nb[0] - 1, max(0, int((x[i, 0] - origin[0]) / width[0])))
        cy = min(nb[1] - 1, max(0, int((x[i, 1] - origin[1]) / width[1])))
        cz = min(nb[2] - 1, max(0, int((x[i, 2] - origin[2]) / width[2])))
        b = (cx * nb[1] + cy) * nb[2] + cz
        binof[i] = b
        nxt[i] = head[b]
        head[b] = i
    reach2 = reach * reach
    cap = neigh.shape[0]
    total = 0
    for i in range(nlocal):
        b = binof[i]
        bx = b // (nb[1] * nb[2])
        by = (b // nb[2]) % nb[1]
        bz = b % nb[2]
        start[i] = total
        n = 0
        xi, yi, zi = x[i, 0], x[i, 1], x[i, 2]
        for ox in range(max(0, bx - 2), min(nb[0], bx + 3)):
            for oy in range(max(0, by - 2), min(nb[1], by + 3)):
                for oz in range(max(0, bz - 2), min(nb[2], bz + 3)):
                    j = head[(ox * nb[1] + oy) * nb[2] + oz]
                    while j >= 0:
                        # locals after i, and ghosts (which come after locals): with newton only
                        # those above i, so that of the pair's two images exactly one is kept
                        keep = j > i
                        if newton and j >= nlocal:
                            zj, yj = x[j, 2], x[j, 1]
                            keep = zj > zi or (zj == zi and (yj > yi or (yj == yi and x[j, 0] > xi)))
                        if keep:
                            dx = xi - x[j, 0]
                            dy = yi - x[j, 1]
                            dz = zi - x[j, 2]
                            if dx * dx + dy * dy + dz * dz < reach2:
                                if total + n < cap:
                                    neigh[total + n] = j
                                n += 1
                        j = nxt[j]
        numneigh[i] = n
        total += n
    return total if total <= cap else -total


@jit(fastmath={"contract", "arcp"})
def force(x, f, nlocal, neigh, numneigh, start, cutoff2, energy, newton):
    """Lennard-Jones forces (on ghosts too with ``newton``); the potential energy of the rank's
    pairs when ``energy`` (without ``newton`` a pair with a ghost counts half: its owner counts
    the other half)."""
    for i in range(f.shape[0]):
        f[i, 0] = 0.0
        f[i, 1] = 0.0
        f[i, 2] = 0.0
    pe = 0.0
    for i in range(nlocal):
        xi, yi, zi = x[i, 0], x[i, 1], x[i, 2]
        fx, fy, fz = 0.0, 0.0, 0.0
        s = start[i]
        for k in range(s, s + numneigh[i]):
            j = neigh[k]
            dx = xi - x[j, 0]
            dy = yi - x[j, 1]
            dz = zi - x[j, 2]
            r2 = dx * dx + dy * dy + dz * dz
            if r2 < cutoff2:
                sr2 = 1.0 / r2
                sr6 = sr2 * sr2 * sr2
                fpair = 48.0 * sr6 * (sr6 - 0.5) * sr2
                fx += dx * fpair
                fy += dy * fpair
                fz += dz * fpair
                if newton or j < nlocal:
                    f[j, 0] -= dx * fpair
                    f[j, 1] -= dy * fpair
                    f[j, 2] -= dz * fpair
                if energy:
                    e = 4.0 * sr6 * (sr6 - 1.0)
                    pe += e if newton or j < nlocal else 0.5 * e
        f[i, 0] += fx
        f[i, 1] += fy
        f[i, 2] += fz
    return pe


@jit
def select(x, n, axis, below, edge, out):
    """Indices of atoms 0..n whose ``axis`` coordinate is below ``edge`` (or at/above it when not
    ``below``), into ``out``; the count."""
    count = 0
    for i in range(n):
        if (x[i, axis] < edge) if below else (x[i, axis] >= edge):
            out[count] = i
            count += 1
    return count


@jit
def pack(x, sendlist, count, axis, shift, buf):
    """Positions of the listed atoms, shifted by a periodic image along ``axis``, into ``buf``."""
    for k in range(count):
        i = sendlist[k]
        buf[3 * k] = x[i, 0]
        buf[3 * k + 1] = x[i, 1]
        buf[3 * k + 2] = x[i, 2]
        buf[3 * k + axis] += shift


@jit
def unpack(x, first, count, buf):
    for k in range(count):
        x[first + k, 0] = buf[3 * k]
        x[first + k, 1] = buf[3 * k + 1]
        x[first + k, 2] = buf[3 * k + 2]


@jit
def copy_shifted(x, sendlist, count, axis, shift, first):
    """A swap with this rank itself (an axis of one box): the listed atoms' positions, shifted by the
    periodic image, straight into ghost rows ``first:first + count``, as LAMMPS copies them (no message).
    The same arithmetic as ``pack`` then ``unpack``; the listed atoms lie below ``first``."""
    for k in range(count):
        i = sendlist[k]
        x[first + k, 0] = x[i, 0]
        x[first + k, 1] = x[i, 1]
        x[first + k, 2] = x[i, 2]
        x[first + k, axis] += shift


@jit
def add_ghost_rows(f, sendlist, count, first):
    """A reverse swap with this rank itself: forces on ghost rows ``first:first + count`` added to the
    atoms they are images of (``pack_rows`` then ``add_rows`` without the buffer)."""
    for k in range(count):
        i = sendlist[k]
        f[i, 0] += f[first + k, 0]
        f[i, 1] += f[first + k, 1]
        f[i, 2] += f[first + k, 2]


@jit
def wrap(x, nlocal, length):
    """Atoms that left the periodic box back into it, as LAMMPS's Domain::pbc does before atoms migrate
    (one home for the image arithmetic whatever the rank count); how many moved. A coordinate that the
    addition rounds up onto the far face goes round again, to the near one."""
    moved = 0
    for i in range(nlocal):
        wrapped = False
        for d in range(3):
            if x[i, d] < 0.0:
                x[i, d] += length[d]
                wrapped = True
            if x[i, d] >= length[d]:
                x[i, d] -= length[d]
                x[i, d] = max(x[i, d], 0.0)
                wrapped = True
        if wrapped:
            moved += 1
    return moved


@jit
def pack_rows(f, first, count, buf):
    """Rows ``first:first + count`` of ``f`` (forces on ghosts) into ``buf``."""
    for k in range(count):
        buf[3 * k] = f[first + k, 0]
        buf[3 * k + 1] = f[first + k, 1]
        buf[3 * k + 2] = f[first + k, 2]


@jit
def add_rows(f, sendlist, count, buf):
    """Forces that came back for the listed atoms, added to theirs."""
    for k in range(count):
        i = sendlist[k]
        f[i, 0] += buf[3 * k]
        f[i, 1] += buf[3 * k + 1]
        f[i, 2] += buf[3 * k + 2]


@jit
def checksum(buf, count):
    """The sum of ``buf[:count]`` in index order: sender and receiver get the same bits."""
    total = 0.0
    for k in range(count):
        total += buf[k]
    return total


@jit
def leaving(x, nlocal, axis, lo, hi):
    """Marks of the local atoms that left ``[lo, hi)`` along ``axis``: -1 below, +1 at or above, 0 stays."""
    marks = np.zeros(nlocal, dtype=np.int8)
    for i in range(nlocal):
        if x[i, axis] < lo:
            marks[i] = -1
        elif x[i, axis] >= hi:
            marks[i] = 1
    return marks


def warm_up() -> None:
    """Compile (or load from cache) every function with the types the kernel passes."""
    cells = np.array([2, 2, 2], dtype=np.int64)
    lo, hi = np.zeros(3), np.full(3, 3.0)
    x, v, ids = lattice(cells, 1.5, lo, hi, 1, BASIS)
    f = np.zeros_like(x)
    n = x.shape[0]
    neigh = np.zeros(n * n, dtype=np.int32)
    numneigh = np.zeros(n, dtype=np.int32)
    start = np.zeros(n, dtype=np.int64)
    for newton in (True, False):
        build(x, n, n, lo, hi, 1.2, neigh, numneigh, start, newton)
        force(x, f, n, neigh, numneigh, start, 1.0, True, newton)
        force(x, f, n, neigh, numneigh, start, 1.0, False, newton)
    integrate_first(x, v, f, n, 0.001)
    integrate_second(v, f, n, 0.001)
    kinetic(v, n)
    out = np.zeros(n, dtype=np.int64)
    count = select(x, n, 0, True, 1.0, out)
    select(x, n, 0, False, 1.0, out)
    buf = np.zeros(3 * n)
    pack(x, out, count, 0, 1.0, buf)
    unpack(x, 0, count, buf)
    pack_rows(f, 0, count, buf)
    add_rows(f, out, count, buf)
    ghosts = np.concatenate((x, x))
    copy_shifted(ghosts, out, count, 0, 1.0, n)
    add_ghost_rows(np.concatenate((f, f)), out, count, n)
    wrap(x.copy(), n, np.full(3, 3.0))
    checksum(buf, count)
    leaving(x, n, 0, 0.0, 3.0)


EWALD_F = 2.0 / math.sqrt(math.pi)


# Pairs beyond r^2 = 2 read the real-space Coulomb force and energy from tables in r^2 with linear interpolation,
# as LAMMPS's lj/cut/coul/long does by default (pair_modify table 12, tabinner sqrt(2)); nearer pairs (a few of
# the hundreds within the cutoff) are computed with libm's erfc (LAMMPS's polynomial errs by 1.5e-7, which summed
# over the nearest pairs of a lattice moved the real-space energy by 4e-6 of itself). An exp, a square root and a division per pair cost as much again
# as the Lennard-Jones pair (measured 57 against 28 ns per pair; 36 with the tables). 8,192 intervals: linear
# interpolation of r^-3 in r^2 errs by at most 2e-6 of the force at r^2 = 2, less beyond.
TABLE_INNER2 = 2.0
TABLE_SIZE = 8192


def coul_tables(alpha, cutoff):
    """(force table, energy table, 1 / interval) over r^2 from TABLE_INNER2 to cutoff^2: the force over r,
    (erfc(alpha r) + 2 alpha r / sqrt(pi) exp(-alpha^2 r^2)) / r^3, and the energy, erfc(alpha r) / r."""
    span = cutoff * cutoff - TABLE_INNER2
    r = np.sqrt(TABLE_INNER2 + np.arange(TABLE_SIZE + 1) * (span / TABLE_SIZE))
    erfc = np.array([math.erfc(alpha * v) for v in r])
    slope = 2.0 * alpha / math.sqrt(math.pi) * r * np.exp(-(alpha * r) ** 2)
    return (erfc + slope) / r ** 3, erfc / r, TABLE_SIZE / span if span > 0 else 0.0


@jit(fastmath={"contract", "arcp"})
def force_coul(x, f, q, nlocal, neigh, numneigh, start, cutoff2, alpha, ftab, etab, inv, energy, newton):
    """``force`` plus the real-space Ewald sum: q_i q_j erfc(alpha r) / r for pairs within the cutoff (Coulomb's
    constant 1, LAMMPS's lj units), from ``coul_tables`` beyond r^2 = TABLE_INNER2. Returns (Lennard-Jones energy,
    real-space Coulomb energy)."""
    for i in range(f.shape[0]):
        f[i, 0] = 0.0
        f[i, 1] = 0.0
        f[i, 2] = 0.0
    pe, pc = 0.0, 0.0
    for i in range(nlocal):
        xi, yi, zi = x[i, 0], x[i, 1], x[i, 2]
        qi = q[i]
        fx, fy, fz = 0.0, 0.0, 0.0
        s = start[i]
        for k in range(s, s + numneigh[i]):
            j = neigh[k]
            dx = xi - x[j, 0]
            dy = yi - x[j, 1]
            dz = zi - x[j, 2]
            r2 = dx * dx + dy * dy + dz * dz
            if r2 < cutoff2:
                sr2 = 1.0 / r2
                sr6 = sr2 * sr2 * sr2
                qq = qi * q[j]
                if r2 >= TABLE_INNER2:
                    u = (r2 - TABLE_INNER2) * inv
                    m = int(u)
                    w = u - m
                    fpair = 48.0 * sr6 * (sr6 - 0.5) * sr2 + qq * (ftab[m] + w * (ftab[m + 1] - ftab[m]))
                    if energy:
                        c = qq * (etab[m] + w * (etab[m + 1] - etab[m]))
                else:
                    r = np.sqrt(r2)
                    grij = alpha * r
                    expm2 = np.exp(-grij * grij)
                    erfc = math.erfc(grij)
                    prefactor = qq / r
                    fpair = (48.0 * sr6 * (sr6 - 0.5) + prefactor * (erfc + EWALD_F * grij * expm2)) * sr2
                    if energy:
                        c = prefactor * erfc
                fx += dx * fpair
                fy += dy * fpair
                fz += dz * fpair
                if newton or j < nlocal:
                    f[j, 0] -= dx * fpair
                    f[j, 1] -= dy * fpair
                    f[j, 2] -= dz * fpair
                if energy:
                    e = 4.0 * sr6 * (sr6 - 1.0)
                    if newton or j < nlocal:
                        pe += e
                        pc += c
                    else:
                        pe += 0.5 * e
                        pc += 0.5 * c
        f[i, 0] += fx
        f[i, 1] += fy
        f[i, 2] += fz
    return pe, pc


@jit
def pack_q(x, q, sendlist, count, axis, shift, buf):
    """``pack`` with each atom's charge after its position (a border message: LAMMPS's atom_style charge)."""
    for k in range(count):
        i = sendlist[k]
        buf[4 * k] = x[i, 0]
        buf[4 * k + 1] = x[i, 1]
        buf[4 * k + 2] = x[i, 2]
        buf[4 * k + axis] += shift
        buf[4 * k + 3] = q[i]


@jit
def unpack_q(x, q, first, count, buf):
    for k in range(count):
        x[first + k, 0] = buf[4 * k]
        x[first + k, 1] = buf[4 * k + 1]
        x[first + k, 2] = buf[4 * k + 2]
        q[first + k] = buf[4 * k + 3]


def warm_up_coul() -> None:
    cells = np.array([2, 2, 2], dtype=np.int64)
    lo, hi = np.zeros(3), np.full(3, 3.0)
    x, _, _ = lattice(cells, 1.5, lo, hi, 1, BASIS)
    n = x.shape[0]
    q = np.ones(n)
    f = np.zeros_like(x)
    neigh = np.zeros(n * n, dtype=np.int32)
    numneigh = np.zeros(n, dtype=np.int32)
    start = np.zeros(n, dtype=np.int64)
    ftab, etab, inv = coul_tables(1.0, 2.0)
    for newton in (True, False):
        build(x, n, n, lo, hi, 1.2, neigh, numneigh, start, newton)
        force_coul(x, f, q, n, neigh, numneigh, start, 4.0, 1.0, ftab, etab, inv, True, newton)
        force_coul(x, f, q, n, neigh, numneigh, start, 4.0, 1.0, ftab, etab, inv, False, newton)
    out = np.arange(n, dtype=np.int64)
    buf = np.zeros(4 * n)
    pack_q(x, q, out, n, 0, 1.0, buf)
    unpack_q(np.concatenate((x, x)), np.concatenate((q, q)), n, n, buf)
