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
