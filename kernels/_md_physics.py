"""md's problem as numbers: the presets, the effective physics, the process grid and the bounds that
validate a run. Pure Python (no numpy, no MPI): the launcher's ``md.check`` and the ranks' ``_md_rank``
both import it, so the two sides cannot disagree and neither imports the other.
"""

import math
from fractions import Fraction

# LAMMPS's bench/in.lj, the problem MD codes and their proxy apps share
LJ = {"cells": (40, 40, 40), "cutoff": 2.5}
# STMV: 1,066,628 atoms at about 0.1 atoms/A^3 with a 12 A cutoff, so about 4/3 pi 12^3 0.1 = 724
# atoms within the cutoff. At reduced density 0.8442 the same count needs
# rc = (724 / (4/3 pi 0.8442))^(1/3) = 5.9; 5.8 gives 4/3 pi 5.8^3 0.8442 = 694 (about 700, as
# the issue asks). 64 x 64 x 65 fcc cells hold 1,064,960 atoms, 0.2% short of STMV's.
SYSTEMS = {"lj": LJ, "stmv": {"cells": (64, 64, 65), "cutoff": 5.8}}

# How far the total energy may move, relative to the starting total, over a run. The truncated,
# unshifted potential jumps as pairs cross the cutoff, the lattice melts in the first tens of steps,
# and lists are not checked between rebuilds (LAMMPS's in.lj does the same): LAMMPS's own log of
# in.lj goes from -4.6134 to -4.6224 over 100 steps (0.19%); md measured 0.187% at 1, 2 and 4 ranks
# (2,048 atoms) and 0.193% on the defaults (256,000 atoms), 0.23% at dt 0.01 and 0.42% at dt 0.02.
# The bound (5x the healthy value) catches broken physics, not a slightly long time step.
ENERGY_DRIFT_BOUND = 1e-2
# Total momentum per atom, in units of one atom's thermal velocity. The start has none, and
# Newton's third law holds pair by pair, so only rounding remains: measured at most 2e-16 at
# 1, 2 and 4 ranks and on the defaults. (With --newton off a corrupted ghost message also shows
# here, 5e-4 at 2,048 atoms; every message carries a checksum besides.)
MOMENTUM_BOUND = 1e-10
# With PME the reciprocal forces come from interpolation on a grid and do not cancel pair by pair: the net
# force is the interpolation's error (Essmann et al. 1995; NAMD's and GROMACS's manuals say the same), and the
# momentum grows with it, steadily over a run and faster on a coarse grid. Measured after 40 steps: 7e-6 per atom
# (1,372 atoms, the default grid), 1.9e-4 (2,048 atoms, a 24^3 grid at spacing 0.56); the bound catches a broken
# spreading or transpose (a lost plane moves momentum by orders more), not PME's own error.
MOMENTUM_BOUND_PME = 1e-2
CORRUPT_SHIFT = 0.1  # sigma: what --corrupt-step adds to one position of one ghost message


def physics(params) -> dict:
    """The effective problem: the system preset with the options that override it."""
    system = SYSTEMS[params.get("system") or "lj"]
    cells = params.get("cells") or system["cells"]
    cutoff = params.get("cutoff") or system["cutoff"]
    return {"cells": tuple(int(n) for n in cells), "cutoff": float(cutoff)}


def lattice_constant(density: float) -> float:
    return (4.0 / density) ** (1.0 / 3.0)


def box_cells(params, dims) -> tuple[int, int, int]:
    cells = physics(params)["cells"]
    return tuple(c * d for c, d in zip(cells, dims)) if params["weak"] else cells


def factorisations(ranks: int) -> list[tuple[int, int, int]]:
    """Every (px, py, pz) with px * py * pz = ranks, in LAMMPS's order (ProcMap::factor: px, then py rising)."""
    found = []
    for px in range(1, ranks + 1):
        if ranks % px:
            continue
        for py in range(1, ranks // px + 1):
            if (ranks // px) % py == 0:
                found.append((px, py, ranks // px // py))
    return found


def process_grid(params, ranks: int) -> list[int]:
    """The process grid md lays its boxes on: LAMMPS's (ProcMap::best_factors), the factorisation whose
    sub-box has the least surface, so the fewest ghosts, and of equal ones the first in LAMMPS's order.

    Which axes are split decides what crosses the network: the swaps go x, then y, then z, and a later
    swap carries the ghosts the earlier ones brought (edges and corners), so 2 ranks split along z (as
    LAMMPS splits in.lj: "1 by 1 by 2") send about 40% more bytes per message than split along x
    (MPI_Dims_create's 2x1x1) for the same atoms. With --weak the grid sets the box, so it is the balanced
    one (MPI_Dims_create's, as halo's) and the box it makes is one that grid fits best anyway."""
    if params["weak"]:
        from .halo import process_dims

        return list(process_dims(ranks))
    cells = physics(params)["cells"]
    # exact arithmetic: ties (a cube's three axes) are decided by the order, never by rounding; the
    # lattice constant scales every area alike, so cells stand for lengths
    best, least = None, None
    for grid in factorisations(ranks):
        sx, sy, sz = (Fraction(c, p) for c, p in zip(cells, grid))
        surface = sx * sy + sx * sz + sy * sz
        if least is None or surface < least:
            best, least = grid, surface
    return list(best)


def neighbours_within(cutoff: float, density: float) -> float:
    """Atoms within ``cutoff`` of an atom in a uniform liquid: 4/3 pi rc^3 rho."""
    return 4.0 / 3.0 * math.pi * cutoff ** 3 * density


def lj_pair(r: float) -> tuple[float, float]:
    """(energy, force magnitude along r, positive = repulsive) of one Lennard-Jones pair."""
    sr6 = r ** -6
    return 4.0 * sr6 * (sr6 - 1.0), 24.0 * sr6 * (2.0 * sr6 - 1.0) / r


def temperature(ke: float, natoms: int) -> float:
    # 3N - 3 degrees of freedom: total momentum is zero (LAMMPS's default count)
    return 2.0 * ke / max(1, 3 * natoms - 3)


# --- electrostatics (--electrostatics pme) ---------------------------------------------------------

# The charges of the four fcc basis sites (0,0,0), (1/2,1/2,0), (1/2,0,1/2), (0,1/2,1/2): +q -q -q +q puts
# opposite charges on alternate (100) planes, x = 0 and x = a/2 (CuAu's L1_0 order, a molten salt's alternation on
# one lattice), so every unit cell, and so every box of whole cells at any rank count, is neutral, and an atom's
# charge follows from its id (id % 4 is its basis site) wherever it migrates.
CHARGES = (1.0, -1.0, -1.0, 1.0)
# NAMD's STMV benchmark (stmv_nve.namd on ks.uiuc.edu/Research/namd/benchmarks): 2 fs steps, PME every
# 4 fs, so fullElectFrequency 2
PME_EVERY = {"stmv": 2}
# GROMACS's defaults, fourierspacing 0.12 nm for rcoulomb 1.0 nm (with ewald-rtol 1e-5 and order 4): the
# grid spacing the Ewald splitting a cutoff and that tolerance give needs for a few 1e-3 of the energy
SPACING_PER_CUTOFF = 0.12


def electrostatics(params) -> str:
    """none or pme: the option, else the system's default (stmv: pme, as NAMD's STMV benchmark)."""
    given = params.get("electrostatics")
    if given:
        return given
    return "pme" if (params.get("system") or "lj") == "stmv" else "none"


def pme_every(params) -> int:
    return int(params.get("pme_every") or PME_EVERY.get(params.get("system") or "lj", 1))


def charges(params) -> tuple[float, float, float, float]:
    return tuple(float(q) for q in (params.get("charges") or CHARGES))


def ewald_alpha(cutoff: float, tolerance: float) -> float:
    """The Ewald splitting parameter beta with erfc(beta * cutoff) = tolerance (GROMACS's ewald-rtol):
    the real-space sum, cut at ``cutoff``, leaves out a ``tolerance`` share of the pair's interaction."""
    low, high = 0.0, 1.0
    while math.erfc(high * cutoff) > tolerance:
        high *= 2.0
    for _ in range(200):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if math.erfc(mid * cutoff) > tolerance else (low, mid)
    return 0.5 * (low + high)


def nice_size(n: int) -> int:
    """The smallest whole number >= n with no prime factor above 5 (FFTs of such sizes are fast)."""
    n = max(1, int(n))
    while True:
        m = n
        for p in (2, 3, 5):
            while m % p == 0:
                m //= p
        if m == 1:
            return n
        n += 1


def pme_spacing(params) -> float:
    spacing = params.get("pme_spacing")
    return float(spacing) if spacing else SPACING_PER_CUTOFF * physics(params)["cutoff"]


def pme_grid(lengths, spacing: float) -> tuple[int, int, int]:
    """Grid points per axis: at least the box over ``spacing``, rounded up to a fast FFT size."""
    return tuple(nice_size(math.ceil(length / spacing - 1e-9)) for length in lengths)


def bspline_at_integers(order: int) -> list[float]:
    """M_order(k) for k = 0..order: the cardinal B-spline at whole numbers (Cox-de Boor recursion)."""

    def m(n, x):
        if n == 2:
            return max(0.0, 1.0 - abs(x - 1.0))
        return (x * m(n - 1, x) + (n - x) * m(n - 1, x - 1.0)) / (n - 1)

    return [m(order, float(k)) for k in range(order + 1)]


def bspline_moduli(size: int, order: int) -> list[float]:
    """|b(m)|^2 of Essmann et al. (1995), eq. 4.4, for m = 0..size-1; a zero denominator (odd orders at
    m = size/2) takes its neighbours' mean, as GROMACS does."""
    values = bspline_at_integers(order)
    out = []
    for m in range(size):
        re = sum(values[k + 1] * math.cos(2 * math.pi * m * k / size) for k in range(order - 1))
        im = sum(values[k + 1] * math.sin(2 * math.pi * m * k / size) for k in range(order - 1))
        out.append(re * re + im * im)
    for m in range(size):
        if out[m] < 1e-10:
            out[m] = 0.5 * (out[m - 1] + out[(m + 1) % size])
    return [1.0 / d for d in out]
