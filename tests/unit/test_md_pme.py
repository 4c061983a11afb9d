"""md's electrostatics without MPI: smooth PME's reciprocal sum and the real-space pair loop against a direct Ewald
sum written here from the textbook formulas (no B-splines, no FFT), the splitting parameter, neutrality, and the
option checks (one line, exit 2)."""

import math

import numpy as np
import pytest

from vnetbench.core.errors import UsageError
from vnetbench.kernels import _md_loops as loops
from vnetbench.kernels import _md_physics as physics
from vnetbench.kernels import defaults, md, parse_params
from vnetbench.kernels._md_pme import Layout, Pme
from vnetbench.kernels._md_rank import Box

ERFC = np.vectorize(math.erfc)


def small_system(cells=3, seed=5, jiggle=0.15):
    """The md lattice of ``cells``^3 fcc cells with its charges, every atom moved at random by up to ``jiggle``."""
    params = defaults("md") | {"cells": (cells,) * 3, "electrostatics": "pme"}
    box = Box(params, [1, 1, 1], [0, 0, 0])
    x, _, ids = loops.lattice(box.cells, box.a, box.lo, box.hi, 1, loops.BASIS)
    x = (x + np.random.default_rng(seed).uniform(-jiggle, jiggle, x.shape)) % box.length
    q = np.array(physics.CHARGES)[ids % 4]
    return box, np.ascontiguousarray(x), q


def direct_ewald(x, q, length, alpha, cutoff):
    """Real-space sum over periodic images within ``cutoff`` (exact erfc), reciprocal sum over k-vectors until
    exp(-pi^2 m^2 / alpha^2) falls below 1e-17, self term: (energies, forces), each by part."""
    n = len(q)
    volume = float(np.prod(length))
    span = int(np.ceil(cutoff / length.min()))
    shifts = np.array([(a, b, c) for a in range(-span, span + 1) for b in range(-span, span + 1)
                       for c in range(-span, span + 1)], dtype=float) * length
    e_real, f_real = 0.0, np.zeros_like(x)
    for i in range(n):
        d = (x[i] - x)[None, :, :] + shifts[:, None, :]  # image, j, 3
        r = np.linalg.norm(d, axis=2)
        keep = (r < cutoff) & (r > 0)
        rr, dd, qj = r[keep], d[keep], np.broadcast_to(q, r.shape)[keep]
        e_real += 0.5 * q[i] * float(np.sum(qj * ERFC(alpha * rr) / rr))
        slope = 2 * alpha / math.sqrt(math.pi) * np.exp(-(alpha * rr) ** 2)
        mag = q[i] * qj * (ERFC(alpha * rr) / rr + slope) / rr ** 2
        f_real[i] = np.sum(mag[:, None] * dd, axis=0)
    mmax = math.sqrt(17 * math.log(10)) * alpha / math.pi
    ranges = [np.arange(-int(mmax * L) - 1, int(mmax * L) + 2) for L in length]
    k = np.array(np.meshgrid(*ranges, indexing="ij")).reshape(3, -1).T / length
    m2 = np.sum(k * k, axis=1)
    k, m2 = k[m2 > 0], m2[m2 > 0]
    g = np.exp(-(math.pi ** 2) * m2 / alpha ** 2) / m2
    phase = np.exp(2j * math.pi * (x @ k.T))  # atom, k
    s = phase.T @ q
    e_rec = float(np.sum(g * np.abs(s) ** 2)) / (2 * math.pi * volume)
    f_rec = (2 * q[:, None] / volume) * (np.imag(phase * np.conj(s)[None, :]) * g[None, :]) @ k
    e_self = -alpha / math.sqrt(math.pi) * float(np.sum(q * q))
    return {"real": e_real, "reciprocal": e_rec, "self": e_self}, {"real": f_real, "reciprocal": f_rec}


def md_real_space(x, q, length, alpha, cutoff):
    """md's pair loop (its list build and force_coul) over the atoms and their 26 periodic images as ghosts."""
    n = len(q)
    shifts = [np.array([a, b, c]) * length for a in (-1, 0, 1) for b in (-1, 0, 1) for c in (-1, 0, 1)
              if (a, b, c) != (0, 0, 0)]
    allx = np.ascontiguousarray(np.concatenate([x] + [x + s for s in shifts]))
    allq = np.concatenate([q] * 27)
    neigh = np.empty(n * 400, dtype=np.int32)
    numneigh, start = np.empty(n, dtype=np.int32), np.empty(n, dtype=np.int64)
    assert loops.build(allx, n, allx.shape[0], np.zeros(3), length, cutoff + 0.3, neigh, numneigh, start, False) >= 0
    f = np.zeros_like(allx)
    lj, coul = loops.force_coul(allx, f, allq, n, neigh, numneigh, start, cutoff * cutoff, alpha,
                                *loops.coul_tables(alpha, cutoff), True, False)
    return lj, coul, f[:n]


def md_lj_only(x, length, cutoff):
    n = x.shape[0]
    shifts = [np.array([a, b, c]) * length for a in (-1, 0, 1) for b in (-1, 0, 1) for c in (-1, 0, 1)
              if (a, b, c) != (0, 0, 0)]
    allx = np.ascontiguousarray(np.concatenate([x] + [x + s for s in shifts]))
    neigh = np.empty(n * 400, dtype=np.int32)
    numneigh, start = np.empty(n, dtype=np.int32), np.empty(n, dtype=np.int64)
    loops.build(allx, n, allx.shape[0], np.zeros(3), length, cutoff + 0.3, neigh, numneigh, start, False)
    f = np.zeros_like(allx)
    pe = loops.force(allx, f, n, neigh, numneigh, start, cutoff * cutoff, True, False)
    return pe, f[:n]


def pme_reciprocal(box, x, q, alpha, spacing, order):
    pme = Pme(None, None, box, physics.pme_grid(box.length, spacing), order, alpha, 0.3)
    f = np.zeros_like(x)
    energy = pme.compute(x, q, len(q), f, 1.0, True, 0)
    assert pme.outside == 0
    return energy, f


CUTOFF = 2.0


@pytest.fixture(scope="module")
def system():
    box, x, q = small_system()
    alpha = physics.ewald_alpha(CUTOFF, 1e-5)
    energies, forces = direct_ewald(x, q, box.length, alpha, CUTOFF)
    return box, x, q, alpha, energies, forces


def test_the_system_is_neutral_and_its_charges_alternate():
    _, _, q = small_system(cells=2)
    assert q.sum() == 0 and set(q) == {1.0, -1.0} and len(q) == 32
    params = defaults("md") | {"cells": (5, 4, 3)}
    assert sum(physics.charges(params)) == 0


def test_splitting_parameter_leaves_the_tolerance_beyond_the_cutoff():
    alpha = physics.ewald_alpha(CUTOFF, 1e-5)
    assert math.erfc(alpha * CUTOFF) == pytest.approx(1e-5, rel=1e-9)
    assert physics.ewald_alpha(5.8, 1e-5) == pytest.approx(3.123413 / 5.8, rel=1e-5)  # beta * rc = 3.1234


def test_reciprocal_energy_and_forces_converge_to_the_direct_ewald_sum(system):
    box, x, q, alpha, energies, forces = system
    # fine grid, order 8: under the asked tolerance
    energy, f = pme_reciprocal(box, x, q, alpha, 0.08, 8)
    assert energy == pytest.approx(energies["reciprocal"], rel=1e-5)
    rec = forces["reciprocal"]
    assert np.abs(f - rec).max() < 1e-5 * np.abs(rec).max()
    # the defaults (0.12 x cutoff, order 4): GROMACS's documented few 1e-3 of the energy
    energy4, f4 = pme_reciprocal(box, x, q, alpha, 0.12 * CUTOFF, 4)
    assert energy4 == pytest.approx(energies["reciprocal"], rel=5e-3)
    assert np.abs(f4 - rec).max() < 2e-2 * np.abs(rec).max()


def test_complex_ffts_give_the_real_ones_energy_and_forces(system):
    # --pme-fft c2c (LAMMPS's scheme: every kx, the product in z-slabs) is the same sum as r2c (GROMACS's, NAMD's)
    box, x, q, alpha, _, _ = system
    grid = physics.pme_grid(box.length, 0.12 * CUTOFF)
    out = {}
    for fft in ("r2c", "c2c"):
        pme = Pme(None, None, box, grid, 4, alpha, 0.3, fft)
        f = np.zeros_like(x)
        out[fft] = pme.compute(x, q, len(q), f, 1.0, True, 0), f
        assert pme.kernel.shape == (grid[2], grid[1], grid[0] // 2 + 1 if fft == "r2c" else grid[0])
    assert out["c2c"][0] == pytest.approx(out["r2c"][0], rel=1e-12)
    assert np.abs(out["c2c"][1] - out["r2c"][1]).max() < 1e-12 * np.abs(out["r2c"][1]).max()
    # c2c's spectrum is the whole complex FFT (its kx > nx/2 filled from their mirrors), odd sizes too
    for odd in ((15, 9, 10), (16, 15, 9)):
        pme = Pme(None, None, box, odd, 4, alpha, 0.3, "c2c")
        pme.slab[:] = np.random.default_rng(1).normal(size=pme.slab.shape)
        full = np.fft.fftn(pme.slab)
        assert np.abs(pme._forward() - full).max() < 1e-12 * np.abs(full).max()


def test_total_coulomb_energy_and_forces_of_md_match_the_direct_ewald_sum(system):
    box, x, q, alpha, energies, forces = system
    lj, coul, f_md = md_real_space(x, q, box.length, alpha, CUTOFF)
    lj_alone, f_lj = md_lj_only(x, box.length, CUTOFF)
    assert lj == pytest.approx(lj_alone, rel=1e-12)
    # the pair loop's erfc: LAMMPS's polynomial (error < 1.5e-7) within r^2 = 2, linear tables beyond
    assert coul == pytest.approx(energies["real"], rel=3e-6)
    rec, f_rec = pme_reciprocal(box, x, q, alpha, 0.08, 8)
    self_energy = -alpha / math.sqrt(math.pi) * float(np.sum(q * q))
    assert self_energy == energies["self"]
    total, reference = coul + rec + self_energy, sum(energies.values())
    assert abs(total - reference) < 1e-5 * abs(reference), (total, reference)
    coulomb_forces = f_md - f_lj + f_rec
    reference_forces = forces["real"] + forces["reciprocal"]
    assert np.abs(coulomb_forces - reference_forces).max() < 1e-5 * np.abs(reference_forces).max()
    # Newton's third law holds for the reciprocal part to the interpolation's accuracy: the net force is small
    assert np.abs(f_rec.sum(axis=0)).max() < 1e-3 * np.abs(f_rec).max()


def test_a_neutral_lattice_has_the_same_energy_whatever_the_grid_size_split():
    # bricks of a 2x1x2 grid of boxes cover the grid: each plane a brick reaches lies in one owner's slab
    params = defaults("md") | {"cells": (6, 4, 6), "electrostatics": "pme"}
    box = Box(params, [2, 1, 2], [1, 0, 0])
    layout = Layout(box, (20, 16, 20), 4, 0.3, 4)
    assert layout.wraps[:, 1].all() and not layout.wraps[:, 0].any()
    for sender in range(4):
        counted = sum(layout.planes(sender, owner).size for owner in range(4))
        assert counted == layout.size[sender, 2]  # every plane goes somewhere, once


def test_bspline_moduli_of_order_four_at_nyquist():
    moduli = physics.bspline_moduli(8, 4)
    # sum_k M4(k+1) (-1)^k = 1/6 - 4/6 + 1/6 = -1/3 at m = K/2
    assert moduli[4] == pytest.approx(9.0)
    assert moduli[0] == pytest.approx(1.0)
    assert all(v > 0 for v in physics.bspline_moduli(9, 5))  # odd order: the zero at K/2 is filled


@pytest.mark.parametrize("argv, words", [
    (["--electrostatics", "pme", "--pme-spacing", "0"], ["--pme-spacing", "above 0"]),
    (["--electrostatics", "pme", "--cells", "8", "--pme-spacing", "5"], ["--pme-spacing", "--pme-order 4"]),
    (["--electrostatics", "pme", "--charges", "1,-1,1,1"], ["--charges", "neutral", "net charge of 2"]),
    (["--electrostatics", "pme", "--pme-every", "3"], ["--pme-every", "--thermo-every"]),
])
def test_bad_pme_input_is_one_line_naming_the_option(argv, words):
    params = parse_params("md", argv)
    with pytest.raises(UsageError) as caught:
        md.check(params, 1)
    text = str(caught.value)
    assert "\n" not in text and all(word in text for word in words), text


def test_stmv_defaults_to_pme_every_two_steps_and_lj_to_none():
    stmv = parse_params("md", ["--system", "stmv"])
    assert physics.electrostatics(stmv) == "pme" and physics.pme_every(stmv) == 2
    lj = parse_params("md", [])
    assert physics.electrostatics(lj) == "none" and physics.pme_every(lj) == 1
    # the stmv grid: 0.12 x 5.8 sigma spacing on a 107.5 x 107.5 x 109.2 sigma box
    box = [64 * physics.lattice_constant(0.8442)] * 2 + [65 * physics.lattice_constant(0.8442)]
    assert physics.pme_grid(box, physics.pme_spacing(stmv)) == (160, 160, 160)


def test_pme_metrics_are_declared_only_where_the_run_had_pme():
    short = {"elapsed_s": 1.0, "force_s": 0.5}
    assert not [metric for metric, _ in md.metrics(short) if metric.name.startswith("pme_")]
    charged = short | {"pme_spread_s": 0.1, "pme_fft_s": 0.2, "pme_solve_s": 0.01, "pme_gather_s": 0.1,
                       "pme_transpose_bytes": 1000, "pme_halo_bytes": 500}
    declared = {metric.name: value for metric, value in md.metrics(charged)}
    assert {name: declared[name] for name in charged if name.startswith("pme_")} == {
        name: value for name, value in charged.items() if name.startswith("pme_")}
    assert {"PME spread", "PME FFT and transposes", "PME solve", "PME gather"} <= set(
        md.breakdown([{"metrics": charged}])["phases s"])


def test_a_changed_value_in_a_grid_block_fails_its_checksum():
    from vnetbench.kernels import _md_pme_loops as pl

    brick = np.random.default_rng(3).normal(size=(5, 4, 6))
    planes = np.array([1, 3], dtype=np.int64)
    buf = np.empty(2 * 24 + 1)
    assert pl.pack_planes(brick, planes, buf, 0) == buf.size
    slab = np.zeros((2, 4, 6))
    _, good = pl.add_planes(slab, 0, 0, 2, np.array([0, 1], dtype=np.int64), 4, 6, 0, 0, 4, 6, buf, 0)
    assert good and np.array_equal(slab, brick[[1, 3]])
    buf[7] += 1e-9  # after the checksum, as a fault on the way would be
    _, good = pl.add_planes(slab, 0, 0, 2, np.array([0, 1], dtype=np.int64), 4, 6, 0, 0, 4, 6, buf, 0)
    assert not good
    back = np.zeros_like(brick)
    _, good = pl.unpack_planes(back, planes, buf, 0)
    assert not good
