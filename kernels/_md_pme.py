"""Smooth particle-mesh Ewald (Essmann et al. 1995) over md's ranks: the reciprocal part of the Ewald sum.

Each evaluation: every rank spreads its atoms' charges with order-p B-splines onto its brick of the grid (its
box plus the splines' reach and half a skin for atoms that moved since the last rebuild); the bricks' planes go
to the ranks whose z-slab of the grid holds them (one Alltoallv: the grid's halo, ghost planes summed into their
owners); each rank does the 2D real-to-complex FFTs of its slab's planes, a transpose to y-slabs (Alltoallv), the
FFTs along z, the product with the influence function (B-spline moduli times exp(-pi^2 m^2 / beta^2) / m^2), the
inverse FFTs and the transpose back (Alltoallv); the owners send the convolved planes back to the bricks that
reach them (Alltoallv) and each rank interpolates its atoms' forces from the splines' derivatives.

Two FFT schemes (``fft``), as two families of PME codes run them; the physics are the same, the mesh's messages
differ. ``r2c`` (the default): real-to-complex FFTs and the product with the influence function in the transposed
(y-slab) layout, so one transpose each way - GROMACS (fft5d, the solve on the transposed grid) and NAMD (PME slabs:
a transpose after the forward FFT and one back before the inverse) do this. ``c2c``: complex-to-complex FFTs of the
real grid, and each 3D FFT transposed back to the z-slabs it started from, so the product is taken in z-slabs and a
3D FFT costs two transposes of twice the values - LAMMPS's PPPM does this (fft3d, created with its output layout equal
to its input layout; its grid is complex; at 2 ranks its x- and y-pencils are both z-slabs, so its 1st remap stays
on the rank and the 2nd and the last each cross to the other rank).

Which rank needs which planes follows from geometry alone (``Layout``, no MPI), so every count is known on
both sides before anything is sent, and every block of every Alltoallv ends with a checksum of its values, as
md's messages do. A block for this rank itself is added or copied in memory, never sent. The FFTs are numpy's
(pocketfft) on whole planes and pencils; the transposes are ours (mpi4py-fft, which does the same with
Alltoallw, is a source-only package on PyPI needing a compiled FFTW per MPI flavour).
"""

import math
from time import perf_counter as clock

import numpy as np

from . import _md_loops as loops
from . import _md_pme_loops as pl
from ._md_physics import bspline_moduli

PHASES = ("pme_spread_s", "pme_fft_s", "pme_solve_s", "pme_gather_s")
FFTS = ("r2c", "c2c")


def cart_coords(rank: int, dims) -> tuple[int, int, int]:
    """The grid coordinates of ``rank`` in a Cartesian communicator without reordering (row-major, as MPI's)."""
    return rank // (dims[1] * dims[2]), (rank // dims[2]) % dims[1], rank % dims[2]


def share(size: int, parts: int, part: int) -> tuple[int, int]:
    return size * part // parts, size * (part + 1) // parts


class Layout:
    """Where every rank's brick lies in the grid, and which grid planes every rank's slab owns. Pure."""

    def __init__(self, box, grid, order, margin, ranks):
        self.grid = np.array(grid, dtype=np.int64)
        self.order, self.ranks = order, ranks
        self.scale = self.grid / np.asarray(box.length, dtype=np.float64)
        # per rank: origin (grid index of brick index 0), size, wraps; per axis x, y, z
        self.origin = np.zeros((ranks, 3), dtype=np.int64)
        self.size = np.zeros((ranks, 3), dtype=np.int64)
        self.wraps = np.zeros((ranks, 3), dtype=np.bool_)
        for r in range(ranks):
            coords = cart_coords(r, box.dims)
            for d in range(3):
                if box.dims[d] == 1:
                    self.wraps[r, d], self.size[r, d] = True, self.grid[d]
                    continue
                lo, hi = box.bounds(d, coords[d])
                first = math.floor((lo - margin) * self.scale[d]) - order + 1
                last = math.floor((hi + margin) * self.scale[d])
                self.origin[r, d], self.size[r, d] = first, last - first + 1
        self.zslab = [share(int(self.grid[2]), ranks, r) for r in range(ranks)]
        self.yslab = [share(int(self.grid[1]), ranks, r) for r in range(ranks)]
        self._planes = {}

    def planes(self, sender: int, owner: int) -> np.ndarray:
        """The z planes of ``sender``'s brick that lie in ``owner``'s slab (brick indices, rising)."""
        key = (sender, owner)
        if key not in self._planes:
            first, end = self.zslab[owner]
            gz = (self.origin[sender, 2] + np.arange(self.size[sender, 2])) % self.grid[2]
            self._planes[key] = np.flatnonzero((gz >= first) & (gz < end)).astype(np.int64)
        return self._planes[key]

    def plane_values(self, rank: int) -> int:
        return int(self.size[rank, 0] * self.size[rank, 1])


class Pme:
    """One rank's share of the reciprocal-space sum; ``comm`` None runs the whole grid in this process."""

    def __init__(self, comm, MPI, box, grid, order, alpha, margin, fft="r2c"):
        if fft not in FFTS:
            raise ValueError(f"fft: {fft!r}; one of {', '.join(FFTS)}")
        self.comm, self.MPI, self.fft = comm, MPI, fft
        self.me = comm.Get_rank() if comm is not None else 0
        self.nranks = comm.Get_size() if comm is not None else 1
        self.order, self.alpha = order, alpha
        self.layout = lay = Layout(box, grid, order, margin, self.nranks)
        me = self.me
        self.brick = np.zeros(tuple(int(n) for n in lay.size[me][::-1]))
        self.phi = np.zeros_like(self.brick)
        nx, ny, nz = (int(n) for n in lay.grid)
        # r2c: kx up to nx/2 (the others are their mirror images' conjugates); c2c: every kx
        self.nxc = nx // 2 + 1 if fft == "r2c" else nx
        z0, z1 = lay.zslab[me]
        y0, y1 = lay.yslab[me]
        self.slab = np.zeros((z1 - z0, ny, nx))
        self.spent = dict.fromkeys(PHASES, 0.0)
        self.transpose_bytes = self.halo_bytes = 0
        self.checked, self.bad, self.outside, self.evaluations = 0, None, 0, 0
        self._step = 0  # the step of the evaluation under way, for the checksum messages
        # the influence function on this rank's part of k-space, [kz][ky][kx]: r2c's y-slab (whole kz), c2c's
        # z-slab (whole ky)
        kz, ky = ((0, nz), (y0, y1)) if fft == "r2c" else ((z0, z1), (0, ny))
        volume = float(np.prod(box.length))
        m = [np.fft.fftfreq(n, d=1.0 / n) / float(length) for n, length in zip((nx, ny, nz), box.length)]
        mx = m[0][:self.nxc]
        my = m[1][slice(*ky)]
        mz = m[2][slice(*kz)]
        m2 = mz[:, None, None] ** 2 + my[None, :, None] ** 2 + mx[None, None, :] ** 2
        b = [np.array(bspline_moduli(n, order)) for n in (nx, ny, nz)]
        moduli = (b[2][slice(*kz)][:, None, None] * b[1][slice(*ky)][None, :, None]
                  * b[0][:self.nxc][None, None, :])
        with np.errstate(divide="ignore"):
            c = np.where(m2 > 0, np.exp(-(math.pi ** 2) * m2 / alpha ** 2) / np.where(m2 > 0, m2, 1.0), 0.0)
        total = nx * ny * nz
        self.kernel = total * moduli * c / (math.pi * volume)
        # energy: with r2c each kx but 0 (and nx/2 for even nx) stands for itself and its mirror image
        weight = np.full(self.nxc, 2.0 if fft == "r2c" else 1.0)
        weight[0] = 1.0
        if fft == "r2c" and nx % 2 == 0:
            weight[-1] = 1.0
        self.energy_weight = self.kernel * weight[None, None, :] / (2.0 * total)

    # --- the Alltoallv with checksummed blocks ---

    def _exchange(self, blocks, incoming, step, what):
        """``blocks[s]`` (float64, checksum last; empty for none) to each other rank s; returns what came from
        each rank r, ``incoming[r]`` doubles (checksum included), as views of one buffer."""
        n = self.nranks
        scounts = np.array([blocks[s].size if s != self.me else 0 for s in range(n)], dtype=np.int64)
        rcounts = np.array([incoming[r] if r != self.me else 0 for r in range(n)], dtype=np.int64)
        sdispl = np.concatenate(([0], np.cumsum(scounts)[:-1]))
        rdispl = np.concatenate(([0], np.cumsum(rcounts)[:-1]))
        send = np.concatenate([blocks[s] for s in range(n) if s != self.me] or [np.empty(0)])
        recv = np.empty(int(rcounts.sum()))
        MPI = self.MPI
        self.comm.Alltoallv([send, (scounts, sdispl), MPI.DOUBLE], [recv, (rcounts, rdispl), MPI.DOUBLE])
        sent = int(scounts.sum()) * 8
        if what == "transpose":
            self.transpose_bytes += sent
        else:
            self.halo_bytes += sent
        self.checked += int((rcounts > 0).sum())
        return [recv[rdispl[r]:rdispl[r] + rcounts[r]] for r in range(n)]

    def _fail(self, step, text):
        if self.bad is None:
            self.bad = (step, text)

    # --- one evaluation ---

    def compute(self, x, q, nlocal, f, factor, energy, step) -> float:
        """Reciprocal forces of the local atoms times ``factor`` added to ``f``; this rank's share of the
        reciprocal energy when ``energy`` (the shares sum to it), else 0."""
        lay, me = self.layout, self.me
        self._step = step
        t0 = clock()
        self.outside += pl.spread(x, q, nlocal, lay.scale, lay.origin[me], lay.wraps[me], lay.grid, self.brick,
                                  self.order)
        self._to_slabs(step)
        t1 = clock()
        spectrum = self._forward()
        t2 = clock()
        local = float(np.sum(self.energy_weight * (spectrum.real ** 2 + spectrum.imag ** 2))) if energy else 0.0
        spectrum *= self.kernel
        t3 = clock()
        self._backward(spectrum)
        t4 = clock()
        self._to_bricks(step)
        pl.gather(x, q, nlocal, lay.scale, lay.origin[me], lay.wraps[me], lay.grid, self.phi, self.order, f,
                  factor)
        t5 = clock()
        for name, seconds in zip(PHASES, (t1 - t0, t2 - t1 + t4 - t3, t3 - t2, t5 - t4)):
            self.spent[name] += seconds
        self.evaluations += 1
        return local

    def _to_slabs(self, step):
        """Bricks' planes summed into the slabs that own them (the grid's halo, forward)."""
        lay, me, n = self.layout, self.me, self.nranks
        self.slab[:] = 0.0
        z0 = lay.zslab[me][0]
        blocks = []
        for s in range(n):
            planes = lay.planes(me, s)
            if s == me or planes.size == 0:
                blocks.append(np.empty(0))
                continue
            buf = np.empty(planes.size * lay.plane_values(me) + 1)
            pl.pack_planes(self.brick, planes, buf, 0)
            blocks.append(buf)
        incoming = [lay.planes(r, me).size * lay.plane_values(r) + 1 if lay.planes(r, me).size else 0
                    for r in range(n)]
        got = self._exchange(blocks, incoming, step, "halo") if n > 1 else [None] * n
        for r in range(n):
            planes = lay.planes(r, me)
            if planes.size == 0:
                continue
            if r == me:
                buf = np.empty(planes.size * lay.plane_values(me) + 1)
                pl.pack_planes(self.brick, planes, buf, 0)
            else:
                buf = got[r]
            _, good = pl.add_planes(self.slab, z0, lay.origin[r, 2], lay.grid[2], planes, lay.size[r, 1],
                                    lay.size[r, 0], lay.origin[r, 1], lay.origin[r, 0], lay.grid[1], lay.grid[0],
                                    buf, 0)
            if not good:
                self._fail(step, f"charge grid planes from rank {r} at step {step}: checksum differs")

    def _to_bricks(self, step):
        """The convolved slabs' planes back to every brick that reaches them (the grid's halo, reverse)."""
        lay, me, n = self.layout, self.me, self.nranks
        z0 = lay.zslab[me][0]
        blocks = []
        for r in range(n):
            planes = lay.planes(r, me)
            if planes.size == 0 or r == me:
                blocks.append(np.empty(0))
                continue
            buf = np.empty(planes.size * lay.plane_values(r) + 1)
            pl.pack_from_slab(self.slab, z0, lay.origin[r, 2], lay.grid[2], planes, lay.size[r, 1],
                              lay.size[r, 0], lay.origin[r, 1], lay.origin[r, 0], lay.grid[1], lay.grid[0], buf, 0)
            blocks.append(buf)
        incoming = [lay.planes(me, s).size * lay.plane_values(me) + 1 if lay.planes(me, s).size else 0
                    for s in range(n)]
        got = self._exchange(blocks, incoming, step, "halo") if n > 1 else [None] * n
        for s in range(n):
            planes = lay.planes(me, s)
            if planes.size == 0:
                continue
            if s == me:
                buf = np.empty(planes.size * lay.plane_values(me) + 1)
                pl.pack_from_slab(self.slab, z0, lay.origin[me, 2], lay.grid[2], planes, lay.size[me, 1],
                                  lay.size[me, 0], lay.origin[me, 1], lay.origin[me, 0], lay.grid[1], lay.grid[0],
                                  buf, 0)
            else:
                buf = got[s]
            _, good = pl.unpack_planes(self.phi, planes, buf, 0)
            if not good:
                self._fail(step, f"potential grid planes from rank {s} at step {step}: checksum differs")

    def _forward(self):
        """The slab's 3D FFT: planes here, then (transposed to y-slabs) along z. r2c: [kz][ky local][kx <= nx/2];
        c2c: transposed back, [kz local][ky][kx]."""
        lay, n = self.layout, self.nranks
        nx, ny = int(lay.grid[0]), int(lay.grid[1])
        half = np.fft.rfft2(self.slab, axes=(1, 2)) if self.slab.size else np.zeros((0, ny, nx // 2 + 1), complex)
        if self.fft == "r2c":
            planes = half
        else:
            # the complex FFT of real planes, its kx > nx/2 filled from their mirror images (X(ky, kx) =
            # conj X(-ky, nx - kx)): every value a complex FFT gives, for the price of a real one
            planes = np.empty((half.shape[0], ny, nx), dtype=complex)
            planes[:, :, :half.shape[2]] = half
            mirror = half[:, (-np.arange(ny)) % ny][:, :, nx - np.arange(half.shape[2], nx)]
            np.conjugate(mirror, out=planes[:, :, half.shape[2]:])
        if n == 1:
            return np.fft.fft(planes, axis=0)
        pencils = self._to_yslabs(planes, "forward transpose")
        pencils = np.fft.fft(pencils, axis=0) if pencils.size else pencils
        return pencils if self.fft == "r2c" else self._to_zslabs(pencils, "forward transpose back")

    def _backward(self, spectrum):
        lay, n = self.layout, self.nranks
        nx, ny = int(lay.grid[0]), int(lay.grid[1])
        if n == 1:
            pencils = np.fft.ifft(spectrum, axis=0)
            planes = pencils
        else:
            if self.fft == "c2c":
                spectrum = self._to_yslabs(spectrum, "backward transpose")
            pencils = np.fft.ifft(spectrum, axis=0) if spectrum.size else spectrum
            planes = self._to_zslabs(pencils, "backward transpose back" if self.fft == "c2c" else "backward transpose")
        if not planes.size:
            return
        # c2c: the planes are Hermitian (the spectrum times a real, even kernel), so their kx <= nx/2 say everything
        self.slab[:] = np.fft.irfft2(planes[:, :, :nx // 2 + 1], s=(ny, nx), axes=(1, 2))

    def _to_yslabs(self, planes, what):
        """[z local][ky][kx] in z-slabs -> [kz][ky local][kx] in y-slabs: one Alltoallv."""
        lay, me, n = self.layout, self.me, self.nranks
        nz, width = int(lay.grid[2]), self.nxc
        y0, y1 = lay.yslab[me]
        blocks = [self._block(planes[:, slice(*lay.yslab[s]), :]) if s != me else np.empty(0) for s in range(n)]
        incoming = [self._count((lay.zslab[r][1] - lay.zslab[r][0]) * (y1 - y0) * width) for r in range(n)]
        got = self._exchange(blocks, incoming, self._step, "transpose")
        pencils = np.empty((nz, y1 - y0, width), dtype=complex)
        for r in range(n):
            z0, z1 = lay.zslab[r]
            if r == me:
                pencils[z0:z1] = planes[:, y0:y1, :]
            elif z1 > z0 and y1 > y0:
                pencils[z0:z1] = self._unblock(got[r], (z1 - z0, y1 - y0, width), r, what)
        return pencils

    def _to_zslabs(self, pencils, what):
        """[kz][ky local][kx] in y-slabs -> [z local][ky][kx] in z-slabs: one Alltoallv."""
        lay, me, n = self.layout, self.me, self.nranks
        ny, width = int(lay.grid[1]), self.nxc
        z0, z1 = lay.zslab[me]
        blocks = [self._block(pencils[slice(*lay.zslab[s])]) if s != me else np.empty(0) for s in range(n)]
        incoming = [self._count((z1 - z0) * (lay.yslab[r][1] - lay.yslab[r][0]) * width) for r in range(n)]
        got = self._exchange(blocks, incoming, self._step, "transpose")
        planes = np.empty((z1 - z0, ny, width), dtype=complex)
        for r in range(n):
            y0, y1 = lay.yslab[r]
            if r == me:
                planes[:, y0:y1] = pencils[z0:z1]
            elif z1 > z0 and y1 > y0:
                planes[:, y0:y1] = self._unblock(got[r], (z1 - z0, y1 - y0, width), r, what)
        return planes

    @staticmethod
    def _count(values: int) -> int:
        return 2 * values + 1 if values else 0

    @staticmethod
    def _block(part) -> np.ndarray:
        if part.size == 0:
            return np.empty(0)
        flat = np.ascontiguousarray(part).view(np.float64).ravel()
        buf = np.empty(flat.size + 1)
        buf[:-1] = flat
        buf[-1] = loops.checksum(buf, flat.size)
        return buf

    def _unblock(self, got, shape, rank, what):
        if got[-1] != loops.checksum(got, got.size - 1):
            self._fail(self._step, f"{what} from rank {rank} at step {self._step}: checksum differs")
        return got[:-1].view(complex).reshape(shape)
