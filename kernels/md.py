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
from ._md_physics import (CORRUPT_SHIFT, SYSTEMS, box_cells, lattice_constant, neighbours_within, physics,
                          process_grid)
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
    parser.add_argument("--corrupt-step", type=int_range(1), default=None, metavar="S",
                        help="self-test: rank 0 alters one position in a ghost message it sends at step S "
                             f"(by {CORRUPT_SHIFT} sigma, after its checksum); the run must come out invalid")


# --- the kernel interface ---

def check(params, ranks):
    for option, key in (("--steps", "steps"), ("--rebuild-every", "rebuild_every"),
                        ("--thermo-every", "thermo_every")):
        if not _whole(params[key]) or params[key] < 1:
            raise UsageError(f"{option}: {params[key]!r} is not allowed; use a whole number >= 1")
    if params.get("newton", "on") not in ("on", "off"):
        raise UsageError(f"--newton: {params['newton']!r} is not allowed; choose on or off")
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


def _bytes_per_rank(params, dims) -> int:
    cells = box_cells(params, dims)
    a = lattice_constant(params["density"])
    reach = physics(params)["cutoff"] + params["skin"]
    sides = [n * a / d for n, d in zip(cells, dims)]
    local = 4 * math.prod(cells) / math.prod(dims)
    with_ghosts = local * math.prod((s + 2 * reach) / s for s in sides)
    pairs = local * neighbours_within(reach, params["density"])  # local pairs half, ghost pairs whole
    # positions, velocities, forces and ids, messages, lists (int32) with 50% head room
    return int(with_ghosts * 100 + 6 * pairs)


def default_timeout(params, ranks):
    dims = process_grid(params, ranks)
    atoms = 4 * math.prod(box_cells(params, dims))
    reach = physics(params)["cutoff"] + params["skin"]
    pairs = 0.7 * neighbours_within(reach, params["density"])
    # pessimistic: 20 ns per listed pair and step (measured 7), a list build costing 10 steps,
    # the atoms spread over no more ranks than there are cpus
    workers = max(1, min(ranks, os.cpu_count() or 1))
    per_step = atoms / workers * pairs * 20e-9 * (1 + 10 / params["rebuild_every"]) + 1e-3
    return 120.0 + params["steps"] * per_step


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --- the rank side ---

def run(comm, params):
    from mpi4py import MPI

    from . import _md_loops as loops
    from ._md_rank import simulate

    loops.warm_up()  # compile (or load) before anything is timed
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
          ("migrate_s", "migration and ghost lists"), ("reduce_s", "reduction"))


def metrics(m):
    from .contract import Metric

    return [(Metric("elapsed_s", "elapsed", "s", "lower", scaling=True), m.get("elapsed_s")),
            (Metric("atom_steps_per_s", "atom-steps per second", "1/s", "higher"), m.get("atom_steps_per_s")),
            *[(Metric(name, label, "s", "lower"), m.get(name)) for name, label in PHASES],
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
