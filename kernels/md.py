"""Short-range molecular dynamics (Lennard-Jones), decomposed in space as MD proxy apps do it.

Atoms start on an fcc lattice at ``--density`` with velocities drawn at ``--temperature``
(seeded per atom id, so every rank count starts from the same state). Each rank owns a box of
the process grid LAMMPS would choose for the box (``_md_physics.process_grid``); every step it
receives, in six staged swaps (x, then y, then z, as LAMMPS and miniMD do), the positions of the
ghost atoms within cutoff + skin of its box, and (``--newton on``, LAMMPS's default) sends the
forces its pairs put on those ghosts back to their owners; every ``--rebuild-every`` steps atoms
are wrapped into the periodic box, those that left go to their new owner, the ghost lists are made
again and the Verlet lists rebuilt. What goes over MPI is what LAMMPS sends: one Sendrecv per swap
with another rank (a swap with itself, along an axis of one box, is a copy), counts before
ghosts and migrating atoms, and along an axis of two boxes one exchange of migrating atoms. Every
message carries a checksum of its values, in the message itself.
Velocity-Verlet NVE; kinetic and potential energy are summed with an Allreduce every
``--thermo-every`` steps. The compute-to-communication balance
follows from the physics: the cutoff and density set the work per atom, the box surface the
bytes exchanged. ``--system stmv`` sizes it like the study's STMV (see ``SYSTEMS``).
"""

import math
import os

from vnetbench.core.errors import UsageError
from vnetbench.core.options import float_range, int_range

# the physics both sides use lives in _md_physics: this module (check) and the ranks (_md_rank) import it,
# and neither imports the other
from ._md_physics import (CHARGES, CORRUPT_SHIFT, PME_EVERY, SPACING_PER_CUTOFF, SYSTEMS, box_cells, charges,
                          electrostatics, lattice_constant, neighbours_within, physics, pme_every, pme_grid,
                          pme_spacing, process_grid)
from .halo import grid

DESCRIPTION = "Lennard-Jones molecular dynamics: fcc start, Verlet lists, 6-way ghost exchange, migration, NVE"
MIN_RANKS = 1


def add_arguments(parser):
    parser.add_argument("--system", choices=sorted(SYSTEMS), default="lj",
                        help="lj (default): LAMMPS's bench/in.lj, 40x40x40 fcc cells (256,000 atoms), "
                             "cutoff 2.5; stmv: 64x64x65 cells (1,064,960 atoms, like the study's "
                             "1,066,628), cutoff 5.8 (about 700 neighbours, as a 12 A cutoff at "
                             "biomolecular density); --cells and --cutoff override either")
    parser.add_argument("--cells", type=grid, default=None, metavar="NX[,NY,NZ]",
                        help="fcc unit cells of the periodic box, 4 atoms each (default: the system's)")
    parser.add_argument("--weak", action="store_true",
                        help="weak scaling: --cells is each rank's share, and the box grows with the "
                             "process grid")
    parser.add_argument("--density", type=float_range(0.05, 2.0), default=0.8442,
                        help="reduced density, atoms per sigma^3 (default 0.8442)")
    parser.add_argument("--temperature", type=float_range(0.0, 100.0), default=1.44,
                        help="initial reduced temperature (default 1.44)")
    parser.add_argument("--cutoff", type=float_range(0.5, 20.0), default=None,
                        help="Lennard-Jones cutoff, sigma (default: the system's, 2.5 for lj)")
    parser.add_argument("--skin", type=float_range(0.0, 5.0), default=0.3,
                        help="Verlet list skin, sigma (default 0.3)")
    parser.add_argument("--dt", type=float_range(1e-5, 0.05), default=0.005,
                        help="time step, tau (default 0.005)")
    parser.add_argument("--steps", type=int_range(1, 10**7), default=100, help="time steps (default 100)")
    parser.add_argument("--rebuild-every", type=int_range(1, 10**6), default=20, metavar="N",
                        help="migrate atoms and rebuild ghost and Verlet lists every N steps (default 20)")
    parser.add_argument("--thermo-every", type=int_range(1, 10**7), default=50, metavar="N",
                        help="sum kinetic and potential energy over all ranks every N steps, and at the "
                             "first and last (default 50)")
    parser.add_argument("--newton", choices=("on", "off"), default="on",
                        help="on (default, as LAMMPS): a pair with a ghost is computed by one rank and the "
                             "ghost's force goes back to its owner, a second message per swap and step; "
                             "off: both ranks compute it, positions only travel (miniMD's newton off)")
    parser.add_argument("--seed", type=int_range(0, 2**62), default=87287,
                        help="velocity seed (default 87287, LAMMPS's in.lj)")
    parser.add_argument("--electrostatics", choices=("none", "pme"), default=None,
                        help="none: Lennard-Jones only (the default, but for stmv); pme: charges on the lattice "
                             "(see --charges), real-space Ewald in the pair loop and smooth particle-mesh Ewald "
                             "with a distributed 3D FFT (the default for stmv, as NAMD's STMV benchmark)")
    parser.add_argument("--charges", type=_charges, default=None, metavar="Q1,Q2,Q3,Q4",
                        help="charges of the four fcc basis sites, reduced units (default "
                             f"{','.join(f'{q:g}' for q in CHARGES)}: alternate (100) planes of opposite "
                             "charge, every cell neutral); they must sum to 0")
    parser.add_argument("--pme-spacing", type=float_range(0.0, 100.0), default=None, metavar="H",
                        help=f"PME grid spacing, sigma (default {SPACING_PER_CUTOFF:g} x the cutoff, GROMACS's "
                             "ratio); each axis gets the next FFT-friendly size")
    parser.add_argument("--pme-order", type=int_range(3, 8), default=4, metavar="P",
                        help="B-spline interpolation order (default 4)")
    parser.add_argument("--pme-every", type=int_range(1, 1000), default=None, metavar="N",
                        help="evaluate PME every N steps as an N-weighted impulse (r-RESPA, NAMD's "
                             "fullElectFrequency; default 1, for stmv "
                             f"{PME_EVERY['stmv']} as NAMD's STMV benchmark); --thermo-every and --steps "
                             "must be multiples")
    parser.add_argument("--pme-fft", choices=("r2c", "c2c"), default="r2c",
                        help="the distributed FFT's scheme, as two families of PME codes run it (same physics, "
                             "other messages): r2c (default): real-to-complex FFTs, the solve in the transposed "
                             "layout, one transpose each way, as GROMACS and NAMD; c2c: complex FFTs of the real "
                             "grid, each 3D FFT transposed back to its slabs, two transposes each way of twice the "
                             "values, as LAMMPS's PPPM")
    parser.add_argument("--ewald-tolerance", type=float_range(1e-12, 0.1), default=1e-5, metavar="TOL",
                        help="Ewald splitting: erfc(beta x cutoff) = TOL (default 1e-5, GROMACS's ewald-rtol)")
    parser.add_argument("--corrupt-step", type=int_range(1), default=None, metavar="S",
                        help="self-test: rank 0 alters one position in a ghost message it sends at step S "
                             f"(by {CORRUPT_SHIFT} sigma, after its checksum); the run must come out invalid")


# --- the kernel interface ---

def resolve(params):
    """The defaults that follow --system, written into the params: a stmv run says electrostatics pme and
    its --pme-every, so it is never pooled with a short-range run (kernels/contract.py)."""
    out = dict(params)
    if out.get("electrostatics") in (None, "none", "pme"):
        out["electrostatics"] = electrostatics(out)
    if out["electrostatics"] == "pme" and out.get("pme_every") is None:
        out["pme_every"] = pme_every(out)
    return out


def check(params, ranks):
    for option, key in (("--steps", "steps"), ("--rebuild-every", "rebuild_every"),
                        ("--thermo-every", "thermo_every")):
        if not _whole(params[key]) or params[key] < 1:
            raise UsageError(f"{option}: {params[key]!r} is not allowed; use a whole number >= 1")
    if params.get("newton", "on") not in ("on", "off"):
        raise UsageError(f"--newton: {params['newton']!r} is not allowed; choose on or off")
    if params.get("electrostatics") not in (None, "none", "pme"):
        raise UsageError(f"--electrostatics: {params['electrostatics']!r} is not allowed; choose none or pme")
    if params.get("system", "lj") not in SYSTEMS:
        raise UsageError(f"--system: {params['system']!r} is not allowed; choose from {', '.join(sorted(SYSTEMS))}")
    for option, key, low, high in (("--density", "density", 0.05, 2.0), ("--temperature", "temperature", 0.0, 100.0),
                                   ("--skin", "skin", 0.0, 5.0), ("--dt", "dt", 1e-5, 0.05)):
        value = params[key]
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not low <= value <= high:
            raise UsageError(f"{option}: {value!r} is not allowed; use a number from {low} to {high}")
    given = params.get("cells")
    if given is not None and (not isinstance(given, (list, tuple)) or len(given) != 3
                              or not all(_whole(n) and n >= 1 for n in given)):
        raise UsageError(f"--cells: {given!r} is not allowed; use NX,NY,NZ with each >= 1")
    cutoff = physics(params)["cutoff"]
    if not 0.5 <= cutoff <= 20.0:
        raise UsageError(f"--cutoff: {cutoff!r} is not allowed; use a number from 0.5 to 20")
    seed = params["seed"]
    if not _whole(seed) or not 0 <= seed <= 2 ** 62:
        raise UsageError(f"--seed: {seed!r} is not allowed; use a whole number from 0 to 2^62")
    corrupt = params["corrupt_step"]
    if corrupt is not None and (not _whole(corrupt) or not 1 <= corrupt <= params["steps"]):
        raise UsageError(f"--corrupt-step: {corrupt!r} is not allowed; use 1 to {params['steps']} (within --steps)")
    dims = process_grid(params, ranks)
    cells = box_cells(params, dims)
    a = lattice_constant(params["density"])
    reach = cutoff + params["skin"]
    if electrostatics(params) == "pme":
        _check_pme(params, [n * a for n in cells])
    for axis, n, parts in zip("xyz", cells, dims):
        # ghosts come from the next box only: each box must be at least cutoff + skin thick
        if n * a / parts < reach:
            need = math.ceil(reach * parts / a)
            raise UsageError(f"--cells: {','.join(map(str, cells))} cells ({n * a:.2f} sigma along {axis}) over "
                             f"a {'x'.join(map(str, dims))} process grid leaves boxes {n * a / parts:.2f} sigma "
                             f"thick, thinner than --cutoff + --skin = {reach:g}; allowed: at least {need} "
                             f"cells along {axis} for {ranks} ranks")
    from .stream import check_memory

    check_memory("--cells", _bytes_per_rank(params, dims), ranks, "the atoms, ghosts and Verlet lists of a box")


def _charges(text: str) -> tuple[float, float, float, float]:
    import argparse

    try:
        values = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not Q1,Q2,Q3,Q4 (four numbers)") from None
    if len(values) != 4 or not all(math.isfinite(v) for v in values):
        raise argparse.ArgumentTypeError(f"{text!r} is not Q1,Q2,Q3,Q4 (four numbers)")
    return values


def _check_pme(params, lengths):
    q = charges(params)
    if len(q) != 4 or abs(sum(q)) > 1e-12 * max(1.0, max(abs(v) for v in q)):
        raise UsageError(f"--charges: {','.join(f'{v:g}' for v in q)} leaves each cell a net charge of "
                         f"{sum(q):g}; PME needs a neutral system: allowed: four charges summing to 0")
    spacing = params.get("pme_spacing")
    if spacing is not None and not (isinstance(spacing, (int, float)) and 0 < spacing <= 100):
        raise UsageError(f"--pme-spacing: {spacing!r} is not allowed; use a number above 0 (sigma), at most 100")
    order = params.get("pme_order") or 4
    if not _whole(order) or not 3 <= order <= 8:
        raise UsageError(f"--pme-order: {order!r} is not allowed; use a whole number from 3 to 8")
    if params.get("pme_fft", "r2c") not in ("r2c", "c2c"):
        raise UsageError(f"--pme-fft: {params['pme_fft']!r} is not allowed; choose r2c or c2c")
    tolerance = params.get("ewald_tolerance") or 1e-5
    if not 1e-12 <= tolerance <= 0.1:
        raise UsageError(f"--ewald-tolerance: {tolerance!r} is not allowed; use a number from 1e-12 to 0.1")
    every = pme_every(params)
    if not _whole(every) or every < 1:
        raise UsageError(f"--pme-every: {every!r} is not allowed; use a whole number >= 1")
    for option, key in (("--thermo-every", "thermo_every"), ("--steps", "steps")):
        if params[key] % every:
            raise UsageError(f"--pme-every: {every} does not divide {option} {params[key]}: energies are summed on "
                             f"PME steps only (as NAMD's outputEnergies); allowed: a divisor of {option}")
    grid = pme_grid(lengths, pme_spacing(params))
    if min(grid) < order:
        axis = "xyz"[grid.index(min(grid))]
        raise UsageError(f"--pme-spacing: {pme_spacing(params):g} gives a {'x'.join(map(str, grid))} grid, fewer "
                         f"points along {axis} than --pme-order {order}; allowed: a spacing of at most "
                         f"{min(lengths) / order:.3g} sigma")


def _bytes_per_rank(params, dims) -> int:
    cells = box_cells(params, dims)
    a = lattice_constant(params["density"])
    reach = physics(params)["cutoff"] + params["skin"]
    sides = [n * a / d for n, d in zip(cells, dims)]
    local = 4 * math.prod(cells) / math.prod(dims)
    with_ghosts = local * math.prod((s + 2 * reach) / s for s in sides)
    pairs = local * neighbours_within(reach, params["density"])  # local pairs half, ghost pairs whole
    # positions, velocities, forces and ids, messages, lists (int32) with 50% head room
    total = with_ghosts * 100 + 6 * pairs
    if electrostatics(params) == "pme":
        # the rank's share of the grid: brick and potential (a little past its share: the splines' reach), slab,
        # two spectra (complex), Alltoallv buffers: about 7 doubles a point by their sizes at stmv, 12 with room;
        # --pme-fft c2c's spectra and transposes hold every kx, twice r2c's
        points = math.prod(pme_grid([n * a for n in cells], pme_spacing(params)))
        total += (12 if params.get("pme_fft", "r2c") == "r2c" else 20) * 8 * points / math.prod(dims)
    return int(total)


def default_timeout(params, ranks):
    dims = process_grid(params, ranks)
    atoms = 4 * math.prod(box_cells(params, dims))
    reach = physics(params)["cutoff"] + params["skin"]
    pairs = 0.7 * neighbours_within(reach, params["density"])
    # pessimistic: 20 ns per listed pair and step (measured 7), a list build costing 10 steps,
    # the atoms spread over no more ranks than there are cpus
    workers = max(1, min(ranks, os.cpu_count() or 1))
    charged = electrostatics(params) == "pme"
    # the real-space Ewald term (an exp and a square root per pair) costs 1.8x a pair's Lennard-Jones (measured)
    per_step = atoms / workers * pairs * (40e-9 if charged else 20e-9) * (1 + 10 / params["rebuild_every"]) + 1e-3
    if charged:
        # PME: spreading and interpolation (measured 1.3 us per atom), FFTs (50 ns per grid point), both x4
        a = lattice_constant(params["density"])
        points = math.prod(pme_grid([n * a for n in box_cells(params, dims)], pme_spacing(params)))
        fft = 1 if params.get("pme_fft", "r2c") == "r2c" else 2  # c2c: twice the values, twice the transposes
        per_step += 4 * (atoms * 1.3e-6 + fft * points * 50e-9) / workers / pme_every(params)
    return 120.0 + params["steps"] * per_step


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --- the rank side ---

def run(comm, params):
    from mpi4py import MPI

    from . import _md_loops as loops
    from ._md_rank import simulate

    loops.warm_up()  # compile (or load) before anything is timed
    if electrostatics(params) == "pme":
        from . import _md_pme_loops

        loops.warm_up_coul()
        _md_pme_loops.warm_up()
    dims = process_grid(params, comm.Get_size())
    # no reordering: cart ranks are world ranks, so rank 0 still writes the record
    cart = comm.Create_cart(dims, periods=[True] * 3, reorder=False)
    try:
        return simulate(cart, params, dims, MPI)
    finally:
        cart.Free()


# --- what report, compare and plots read (kernels/contract.py) ---------------------------

SMOKE = ["--cells", "8", "--steps", "20", "--rebuild-every", "5", "--thermo-every", "10"]

PHASES = (("force_s", "force"), ("neighbour_s", "neighbour build"), ("comm_s", "ghost exchange"),
          ("migrate_s", "migration and ghost lists"), ("reduce_s", "reduction"),
          # --electrostatics pme: spreading (with the grid's halo to the slabs' owners), the FFTs with their
          # transposes, the product with the influence function, interpolation (with the halo back)
          ("pme_spread_s", "PME spread"), ("pme_fft_s", "PME FFT and transposes"), ("pme_solve_s", "PME solve"),
          ("pme_gather_s", "PME gather"))


def metrics(m):
    from .contract import Metric

    return [(Metric("elapsed_s", "elapsed", "s", "lower", scaling=True), m.get("elapsed_s")),
            (Metric("atom_steps_per_s", "atom-steps per second", "1/s", "higher"), m.get("atom_steps_per_s")),
            # PME's only where the run had it (--electrostatics pme)
            *[(Metric(name, label, "s", "lower"), m.get(name)) for name, label in PHASES
              if not name.startswith("pme_") or name in m],
            *[(Metric(name, label, "B", None), m[name]) for name, label in
              (("pme_transpose_bytes", "PME transpose bytes"), ("pme_halo_bytes", "PME grid halo bytes")) if name in m],
            (Metric("energy_drift", "relative energy drift", "", None), m.get("energy_drift"))]


def table(names):
    return [name for name in ("elapsed_s",) if name in names]


def headline(m):
    rate = m.get("atom_steps_per_s")
    return [("elapsed s", m.get("elapsed_s")),
            ("Matom-steps/s", rate / 1e6 if isinstance(rate, (int, float)) else None),
            ("force s", m.get("force_s")), ("comm s", m.get("comm_s"))]


def breakdown(runs):
    """Where a configuration's elapsed time goes: median seconds per phase over its runs."""
    import statistics

    parts = {}
    for name, label in PHASES:
        values = [run["metrics"].get(name) for run in runs if isinstance(run["metrics"].get(name), (int, float))]
        if values:
            parts[label] = float(statistics.median(values))
    return {"phases s": parts} if parts else None


BREAKDOWN_TITLE = "md: time per phase"
