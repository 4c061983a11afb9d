"""md under real mpirun at 1, 2 and 4 ranks (4 oversubscribed): the same trajectory at every rank
count, conservation, migration and periodic ghosts, and a corrupted message caught."""

import itertools

import numpy as np
import pytest

from conftest import direct_launch, requires_mpi

pytestmark = [pytest.mark.timeout(120), requires_mpi]

# 1,372 atoms (7^3 cells): big enough for 4 boxes of cutoff + skin, small enough to run in a second
SMALL = ["--cells", "7", "--steps", "60", "--rebuild-every", "10", "--thermo-every", "20"]
# energies at the thermo steps agree between rank counts to 1e-13 (measured: the sums only
# change order); the trajectory is chaotic, so a real divergence grows far past this
AGREE = 1e-10


def fcc_lattice_energy(cutoff: float, density: float) -> float:
    """Potential energy per atom of a perfect fcc crystal, summed over lattice sites by hand."""
    a = (4 / density) ** (1 / 3)
    basis = np.array([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])
    span = int(np.ceil(cutoff / a)) + 1
    cells = np.array(list(itertools.product(range(-span, span + 1), repeat=3)), dtype=float)
    sites = (cells[:, None, :] + basis[None, :, :]).reshape(-1, 3) * a
    r = np.linalg.norm(sites, axis=1)
    r = r[(r > 0) & (r < cutoff)]
    return 0.5 * float(np.sum(4 * (r ** -12 - r ** -6)))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = {}
    for ranks, extra in ((1, []), (2, []), (4, []), ("2 newton off", ["--newton", "off"])):
        n = ranks if isinstance(ranks, int) else 2
        done, record = direct_launch("md", n, [*SMALL, *extra], tmp_path_factory.mktemp(f"md{n}"))
        assert done.returncode == 0, done.stderr[-3000:]
        out[ranks] = record
    return out


# LAMMPS's grids for a cube ("1 by 1 by 2", "1 by 2 by 2"): the split axes' swaps go over MPI, the others
# are copies
@pytest.mark.parametrize("ranks, dims", [(1, [1, 1, 1]), (2, [1, 1, 2]), (4, [1, 2, 2])])
def test_runs_validates_and_conserves(runs, ranks, dims):
    record = runs[ranks]
    assert record["status"] == "ok" and record["validation"]["passed"], record["validation"]
    m = record["metrics"]
    assert m["dims"] == dims and m["atoms"] == 1372 and m["steps"] == 60 and m["rebuilds"] == 6
    # per split axis (two boxes along it) a rank has 2 swaps with the other box: positions and forces at
    # every step and at set-up (2 x 2 x 61), a count before each of 7 border rounds (2 x 7), and at each of
    # 6 rebuilds one count and one message of migrating atoms (2 x 6); nothing at all at 1 rank
    split = sum(1 for n in dims if n > 1)
    assert m["messages_checked"] == ranks * split * (2 * 2 * 61 + 2 * 7 + 2 * 6)
    assert [row["step"] for row in m["thermo"]] == [0, 20, 40, 60]
    assert all(row["atoms"] == 1372 for row in m["thermo"])
    assert m["momentum_per_atom"] < 1e-13
    assert m["thermo"][0]["temperature"] == pytest.approx(1.44, rel=1e-12)
    assert 0 < abs(m["energy_drift"]) < 5e-3  # melting under a truncated potential: LAMMPS's in.lj moves 0.19%
    assert m["atoms_per_rank"]["min"] * ranks <= 1372 <= m["atoms_per_rank"]["max"] * ranks
    assert m["atom_steps_per_s"] == pytest.approx(1372 * 60 / m["elapsed_s"])
    for phase in ("force_s", "neighbour_s", "comm_s", "migrate_s", "reduce_s"):
        assert 0 < m[phase] <= m["elapsed_s"]


def test_the_same_trajectory_at_one_two_and_four_ranks_with_newton_on_and_off(runs):
    energies = {ranks: np.array([[row["pe"], row["ke"], row["etotal"]] for row in record["metrics"]["thermo"]])
                for ranks, record in runs.items()}
    assert runs["2 newton off"]["status"] == "ok" and runs["2 newton off"]["metrics"]["newton"] == "off"
    for ranks in (2, 4, "2 newton off"):
        assert np.allclose(energies[ranks], energies[1], rtol=AGREE, atol=0), (energies[ranks], energies[1])
    # the run did go somewhere: the crystal melted, so agreement is not agreement of a frozen state
    assert energies[1][-1, 0] > energies[1][0, 0] + 0.5


def test_ghosts_across_periodic_edges_give_the_crystal_its_lattice_energy(runs):
    # at step 0 every atom must see its whole fcc neighbourhood, most of it through periodic
    # images (at 1 rank every ghost is one); LAMMPS prints E_pair -6.7733681 for in.lj
    expected = fcc_lattice_energy(2.5, 0.8442)
    assert expected == pytest.approx(-6.7733681, abs=1e-7)
    for record in runs.values():
        assert record["metrics"]["thermo"][0]["pe"] == pytest.approx(expected, rel=1e-11)  # summation order only


def test_atoms_migrate_across_boxes_and_periodic_edges(runs):
    # hot atoms move between rebuilds: atoms that leave the periodic box are wrapped back at every rank
    # count, the same atoms at the same steps (the trajectory is one); at 2 and 4 ranks atoms change owner
    # too, at 1 rank none is sent anywhere (its box spans every axis)
    wrapped = {ranks: runs[ranks]["metrics"]["migrated_across_edges"] for ranks in (1, 2, 4)}
    assert wrapped[1] > 0 and wrapped[2] == wrapped[1] and wrapped[4] == wrapped[1], wrapped
    assert runs[1]["metrics"]["migrated"] == 0
    assert runs[2]["metrics"]["migrated"] > 0 and runs[4]["metrics"]["migrated"] > runs[2]["metrics"]["migrated"]


@pytest.mark.parametrize("newton", ["on", "off"])
def test_corrupt_step_is_invalid(tmp_path, newton):
    done, record = direct_launch("md", 2, [*SMALL, "--corrupt-step", "13", "--newton", newton], tmp_path)
    assert done.returncode == 1, done.stderr[-3000:]
    assert record["status"] == "invalid" and record["validation"]["passed"] is False
    detail = record["validation"]["detail"]
    assert "rank 1: positions from rank 0 at step 13: checksum differs" in detail, detail
    if newton == "off":  # the ranks computed the pair from different positions: momentum is off too
        assert "momentum" in detail, detail


def test_refuses_boxes_thinner_than_cutoff_plus_skin(tmp_path):
    done, record = direct_launch("md", 2, ["--cells", "3"], tmp_path)
    assert done.returncode == 2 and record is None
    assert "--cells" in done.stderr and "--cutoff" in done.stderr


# PME on the same 1,372 atoms, a coarse grid (24^3: spacing 0.5) so that 4 oversubscribed ranks stay quick
PME = [*SMALL[:2], "--steps", "40", "--rebuild-every", "10", "--thermo-every", "20", "--electrostatics", "pme",
       "--pme-spacing", "0.5"]


@pytest.fixture(scope="module")
def pme_runs(tmp_path_factory):
    out = {}
    for ranks, extra in ((1, []), (2, []), (4, []), ("2 every 2", ["--pme-every", "2"]),
                         ("2 c2c", ["--pme-fft", "c2c"])):
        n = ranks if isinstance(ranks, int) else 2
        done, record = direct_launch("md", n, [*PME, *extra], tmp_path_factory.mktemp(f"pme{n}"))
        assert done.returncode == 0, done.stderr[-3000:]
        out[ranks] = record
    return out


def test_pme_gives_the_same_energies_at_one_two_and_four_ranks(pme_runs):
    energies = {ranks: np.array([[row["pe"], row["ke"], row["coul"]] for row in record["metrics"]["thermo"]])
                for ranks, record in pme_runs.items()}
    for ranks in (2, 4, "2 c2c"):  # LAMMPS's FFT scheme too: the same sum, other messages
        assert np.allclose(energies[ranks], energies[1], rtol=AGREE, atol=0), (energies[ranks], energies[1])
    # the charges do something: the Coulomb energy is a real part of the potential, and it moves as the lattice melts
    assert energies[1][0, 2] < -0.5 and abs(energies[1][-1, 2] - energies[1][0, 2]) > 1e-3
    # every 2 steps: the same start, then another (nearby) trajectory
    assert np.allclose(energies["2 every 2"][0], energies[2][0], rtol=AGREE, atol=0)


@pytest.mark.parametrize("ranks", [1, 2, 4, "2 every 2", "2 c2c"])
def test_pme_runs_validate_conserve_and_record_their_phases(pme_runs, ranks):
    record = pme_runs[ranks]
    assert record["status"] == "ok", record["validation"]
    m = record["metrics"]
    assert m["electrostatics"] == "pme" and m["pme_grid"] == [24, 24, 24] and m["pme_order"] == 4
    assert abs(m["energy_drift"]) < 5e-3 and m["pme_fft"] == ("c2c" if ranks == "2 c2c" else "r2c")
    every = 2 if ranks == "2 every 2" else 1
    assert m["pme_every"] == every and m["pme_evaluations"] == 40 // every
    for phase in ("pme_spread_s", "pme_fft_s", "pme_solve_s", "pme_gather_s"):
        assert 0 < m[phase] < m["elapsed_s"]
    if ranks == 1:  # nothing to send: the slab is the whole grid
        assert m["messages_checked"] == 0 and m["pme_transpose_bytes"] == 0 and m["pme_halo_bytes"] == 0
    else:
        # a transpose sends each rank's share of the other ranks' half-spectrum (24 x 24 x 13 complex values),
        # forward and back, with a checksum per block
        n = 4 if ranks == 4 else 2
        per_evaluation = 2 * (24 * 24 * 13 * 16 * (n - 1) / n + 8 * (n - 1))
        if ranks == "2 c2c":  # every kx (24, not 13), and each 3D FFT transposed back: 4 transposes
            per_evaluation = 4 * (24 * 24 * 24 * 16 * (n - 1) / n + 8 * (n - 1))
        assert m["pme_transpose_bytes"] == pytest.approx(m["pme_evaluations"] * per_evaluation, rel=0.05)
        assert m["pme_halo_bytes"] > 0
