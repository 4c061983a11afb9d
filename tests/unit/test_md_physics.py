"""md's physics without MPI: the pair loop against analytic Lennard-Jones, the lattice, the boxes,
the process grid, the periodic wrap and the swaps a rank makes with itself, the STMV preset's numbers
and the option checks."""

import math

import numpy as np
import pytest

from vnetbench.core.errors import UsageError
from vnetbench.kernels import _md_loops as loops
from vnetbench.kernels import _md_physics as physics
from vnetbench.kernels import defaults, md, parse_params
from vnetbench.kernels._md_rank import Box


def pair_forces(positions, nlocal, cutoff=2.5, skin=0.3, newton=True):
    """Forces and potential energy of ``positions`` (locals first) through md's list build and force loop."""
    x = np.array(positions, dtype=np.float64)
    lo, hi = np.full(3, -5.0), np.full(3, 5.0)
    neigh = np.empty(64, dtype=np.int32)
    numneigh = np.empty(nlocal, dtype=np.int32)
    start = np.empty(nlocal, dtype=np.int64)
    assert loops.build(x, nlocal, x.shape[0], lo, hi, cutoff + skin, neigh, numneigh, start, newton) >= 0
    f = np.zeros_like(x)
    pe = loops.force(x, f, nlocal, neigh, numneigh, start, cutoff * cutoff, True, newton)
    return f, pe


@pytest.mark.parametrize("r", [0.95, 2 ** (1 / 6), 1.5, 2.49])
def test_two_atoms_force_and_energy_are_analytic_lennard_jones(r):
    direction = np.array([1.0, 2.0, -2.0]) / 3.0  # not along an axis
    f, pe = pair_forces([[0.1, 0.2, 0.3], (np.array([0.1, 0.2, 0.3]) + r * direction).tolist()], 2)
    sr6 = r ** -6
    energy, magnitude = 4 * sr6 * (sr6 - 1), 24 * sr6 * (2 * sr6 - 1) / r  # by hand, not md's helper
    assert pe == pytest.approx(energy, rel=1e-13, abs=1e-15)
    assert physics.lj_pair(r) == pytest.approx((energy, magnitude), rel=1e-13, abs=1e-15)
    # repulsive (positive magnitude) pushes atom 1 away from atom 0, along the direction
    assert f[1] == pytest.approx(magnitude * direction, rel=1e-12, abs=1e-14)
    assert f[0] == pytest.approx(-f[1], rel=1e-15, abs=1e-15)  # Newton's third law, exactly


def test_beyond_the_cutoff_there_is_no_force_but_the_pair_stays_listed():
    f, pe = pair_forces([[0, 0, 0], [2.6, 0, 0]], 2)
    assert pe == 0 and not f.any()


def test_newton_off_a_ghost_partner_gets_no_force_and_half_the_energy():
    # its owner computes the same pair for its own atom: each side counts half the energy
    f, pe = pair_forces([[0, 0, 0], [1.2, 0, 0]], 1, newton=False)
    energy, magnitude = physics.lj_pair(1.2)
    assert pe == pytest.approx(energy / 2, rel=1e-13)
    assert f[0] == pytest.approx([-magnitude, 0, 0], rel=1e-13) and not f[1].any()


@pytest.mark.parametrize("ghost, kept", [([1.2, 0, 0], True), ([-1.2, 0, 0], False), ([0, 0.9, 0.5], True),
                                         ([0.3, -0.2, -1.0], False), ([0, -0.1, 1.0], True)])
def test_newton_on_one_of_the_two_ranks_keeps_a_ghost_pair(ghost, kept):
    # the owner of the ghost sees this atom as a ghost at minus the offset: exactly one side keeps it
    f, pe = pair_forces([[0, 0, 0], ghost], 1)
    mirrored_f, mirrored_pe = pair_forces([[0, 0, 0], [-c for c in ghost]], 1)
    energy, _ = physics.lj_pair(float(np.linalg.norm(ghost)))
    assert (pe, mirrored_pe) == ((pytest.approx(energy, rel=1e-13), 0.0) if kept
                                 else (0.0, pytest.approx(energy, rel=1e-13)))
    kept_f = f if kept else mirrored_f
    assert kept_f[1] == pytest.approx(-kept_f[0], rel=1e-15) and kept_f[1].any()  # the ghost's force goes back


def test_lattice_boxes_of_a_grid_hold_every_atom_once_with_the_same_velocities():
    params = defaults("md") | {"cells": (5, 4, 3)}
    whole = Box(params, [1, 1, 1], [0, 0, 0])
    x1, v1, ids1 = loops.lattice(whole.cells, whole.a, whole.lo, whole.hi, 7, loops.BASIS)
    assert ids1.size == whole.natoms == 4 * 60 and np.array_equal(np.sort(ids1), np.arange(240))
    dims = [2, 2, 1]
    seen = []
    for coords in [(i, j, 0) for i in range(2) for j in range(2)]:
        box = Box(params, dims, coords)
        x, v, ids = loops.lattice(box.cells, box.a, box.lo, box.hi, 7, loops.BASIS)
        assert ((x >= box.lo) & (x < box.hi)).all()
        order = np.argsort(ids1)
        assert np.array_equal(v, v1[order][ids]) and np.array_equal(x, x1[order][ids])
        seen.extend(ids.tolist())
    assert sorted(seen) == list(range(240))
    v = loops.lattice(whole.cells, whole.a, whole.lo, whole.hi, 8, loops.BASIS)[1]
    assert not np.array_equal(v, v1) and np.abs(v).max() <= 0.5  # the seed matters


def test_boxes_share_faces_exactly_and_ghosts_cross_the_periodic_edges():
    params = defaults("md") | {"cells": (7, 5, 6)}
    dims = [3, 2, 1]
    boxes = {(i, j): Box(params, dims, [i, j, 0]) for i in range(3) for j in range(2)}
    length = boxes[0, 0].length
    assert length == pytest.approx(np.array([7, 5, 6]) * (4 / 0.8442) ** (1 / 3))
    for (i, j), box in boxes.items():
        if i < 2:
            assert box.hi[0] == boxes[i + 1, j].lo[0]  # bit for bit: no atom falls between
        assert boxes[0, j].lo[0] == 0.0 and boxes[2, j].hi[0] == length[0]
    # only the boxes at the edges shift what they send, by a whole box length
    assert boxes[0, 0].ghost_shift(0, -1) == length[0] and boxes[0, 0].ghost_shift(0, 1) == 0.0
    assert boxes[2, 1].ghost_shift(0, 1) == -length[0] and boxes[1, 0].ghost_shift(0, -1) == 0.0
    assert boxes[1, 0].ghost_shift(2, -1) == length[2] and boxes[1, 0].ghost_shift(2, 1) == -length[2]


def test_the_stmv_preset_is_sized_like_the_study():
    params = parse_params("md", ["--system", "stmv"])
    physics = md.physics(params)
    atoms = 4 * math.prod(physics["cells"])
    assert abs(atoms - 1_066_628) / 1_066_628 < 0.01
    assert 650 < md.neighbours_within(physics["cutoff"], params["density"]) < 750
    # NAMD's 12 A cutoff at 0.1 atoms/A^3, the count the preset matches
    assert md.neighbours_within(12.0, 0.1) == pytest.approx(724, rel=0.01)
    assert md.physics(parse_params("md", ["--system", "stmv", "--cutoff", "3"]))["cutoff"] == 3.0


def test_defaults_are_lammps_in_lj():
    params = defaults("md")
    assert md.physics(params) == {"cells": (40, 40, 40), "cutoff": 2.5}
    assert (params["density"], params["temperature"], params["skin"], params["dt"], params["steps"],
            params["rebuild_every"]) == (0.8442, 1.44, 0.3, 0.005, 100, 20)


@pytest.mark.parametrize("argv, ranks, option", [
    (["--cells", "3"], 2, "--cells"),  # 5 sigma over 2 boxes: thinner than 2.8
    (["--cells", "8", "--cutoff", "14"], 1, "--cells"),  # 13.4 sigma box, 14.3 reach
    (["--steps", "10", "--corrupt-step", "11"], 1, "--corrupt-step"),
])
def test_check_names_the_option(argv, ranks, option):
    with pytest.raises(UsageError, match=option):
        md.check(parse_params("md", argv), ranks)


@pytest.mark.parametrize("argv, option", [(["--dt", "0"], "--dt"), (["--cells", "4,4"], "--cells"),
                                          (["--system", "water"], "--system"), (["--density", "-1"], "--density")])
def test_parsing_refuses_bad_values(argv, option):
    with pytest.raises(UsageError, match=option):
        parse_params("md", argv)


def test_check_passes_the_smoke_options_at_two_and_four_ranks():
    for ranks in (2, 4):
        md.check(parse_params("md", md.SMOKE), ranks)


def test_weak_scaling_grows_the_box_with_the_process_grid():
    params = parse_params("md", ["--cells", "6,5,4", "--weak"])
    assert md.box_cells(params, [2, 2, 1]) == (12, 10, 4)
    assert md.box_cells(parse_params("md", ["--cells", "6,5,4"]), [2, 2, 1]) == (6, 5, 4)
    md.check(params, 4)  # each rank's 6x5x4 cells are thick enough on their own


@pytest.mark.parametrize("argv, ranks, grid", [
    ([], 2, [1, 1, 2]),  # LAMMPS on in.lj at 2 ranks: "1 by 1 by 2 MPI processor grid"
    ([], 4, [1, 2, 2]),
    ([], 8, [2, 2, 2]),
    ([], 3, [1, 1, 3]),
    (["--system", "stmv"], 2, [1, 1, 2]),  # 64x64x65: the long axis is split (less surface)
    (["--cells", "40,20,20"], 2, [2, 1, 1]),  # a long box is cut across its length, whatever the order
    (["--cells", "20,80,20"], 4, [1, 4, 1]),  # cubes beat slabs
    (["--cells", "6,5,4", "--weak"], 2, [2, 1, 1]),  # weak scaling: the balanced grid makes the box
])
def test_the_process_grid_is_lammps_least_surface_choice(argv, ranks, grid):
    params = parse_params("md", argv)
    assert physics.process_grid(params, ranks) == grid
    cells = physics.box_cells(params, grid)
    # no other factorisation has less ghost surface
    def surface(g):
        s = [c / p for c, p in zip(cells, g)]
        return s[0] * s[1] + s[0] * s[2] + s[1] * s[2]
    assert all(surface(grid) <= surface(g) + 1e-12 for g in physics.factorisations(ranks))
    assert sorted(physics.factorisations(ranks)) == sorted(
        (a, b, ranks // a // b) for a in range(1, ranks + 1) for b in range(1, ranks + 1) if ranks % (a * b) == 0)


def test_check_refuses_boxes_too_thin_on_the_grid_md_will_use():
    # 7 cells (11.8 sigma) split in two along z leave 5.9 sigma: fine for 2.8, not for a 6 sigma cutoff
    md.check(parse_params("md", ["--cells", "7"]), 2)
    with pytest.raises(UsageError, match="along z"):
        md.check(parse_params("md", ["--cells", "7", "--cutoff", "6"]), 2)


def test_wrap_puts_atoms_back_in_the_box_as_lammps_pbc_does():
    length = np.array([10.0, 10.0, 10.0])
    x = np.array([[-0.5, 5.0, 5.0], [10.0, 5.0, 5.0], [3.0, -1e-17, 12.5], [1.0, 2.0, 3.0]])
    moved = loops.wrap(x, 4, length)
    assert moved == 3
    assert x[0].tolist() == [9.5, 5.0, 5.0] and x[1].tolist() == [0.0, 5.0, 5.0]
    # -1e-17 + 10 rounds to 10.0, the far face: it goes round again, to the near one
    assert x[2].tolist() == [3.0, 0.0, 2.5] and x[3].tolist() == [1.0, 2.0, 3.0]
    assert ((x >= 0) & (x < length)).all()


def test_a_swap_with_itself_is_the_message_it_replaces_bit_for_bit():
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.random((50, 3)) * 7, np.zeros((20, 3))])
    sendlist = rng.choice(50, 20, replace=False).astype(np.int64)
    buf = np.empty(60)
    loops.pack(x, sendlist, 20, 2, -7.123, buf)
    through = x.copy()
    loops.unpack(through, 50, 20, buf)
    loops.copy_shifted(x, sendlist, 20, 2, -7.123, 50)
    assert np.array_equal(x, through)
    f = rng.standard_normal((70, 3))
    loops.pack_rows(f, 50, 20, buf)
    through = f.copy()
    loops.add_rows(through, sendlist, 20, buf)
    loops.add_ghost_rows(f, sendlist, 20, 50)
    assert np.array_equal(f, through)


def test_box_bounds_are_periodic_and_shared_between_neighbours():
    box = Box(defaults("md") | {"cells": (7, 5, 6)}, [3, 2, 1], [1, 0, 0])
    assert box.bounds(0, 1) == (box.lo[0], box.hi[0])
    assert box.bounds(0, -1) == box.bounds(0, 2) and box.bounds(0, 3) == box.bounds(0, 0)
    assert box.bounds(0, 0)[1] == box.bounds(0, 1)[0] and box.bounds(0, 2)[1] == box.length[0]
