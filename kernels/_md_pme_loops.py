"""PME's per-atom and per-plane work, compiled with numba: B-spline weights, charge spreading onto a
rank's brick of the grid, force interpolation from it, and moving grid planes between a brick and the
slab of the ranks that own them.

A brick is a rank's part of the charge grid, ``[z][y][x]`` (x fastest), covering the grid points its atoms'
splines reach: along an axis the rank's box spans it is the whole axis (indices wrap), along a split
axis an index range starting at ``origin`` (no wrap; atoms outside it are counted, not spread). Imported
only by ranks: importing numba is slow.
"""

import math

import numpy as np

from ._stream_loops import jit


@jit
def _weights(u, order, theta, dtheta):
    """Cardinal B-spline weights of order ``order`` at fractional grid coordinate ``u`` and their derivatives
    in u: ``theta[j]`` belongs to grid index floor(u) - order + 1 + j (Essmann et al. 1995, eqs. 4.1-4.2);
    returns floor(u)."""
    fl = math.floor(u)
    w = u - fl
    theta[order - 1] = 0.0
    theta[1] = w
    theta[0] = 1.0 - w
    for k in range(3, order):
        div = 1.0 / (k - 1)
        theta[k - 1] = div * w * theta[k - 2]
        for l in range(1, k - 1):
            theta[k - l - 1] = div * ((w + l) * theta[k - l - 2] + (k - l - w) * theta[k - l - 1])
        theta[0] = div * (1.0 - w) * theta[0]
    dtheta[0] = -theta[0]
    for k in range(1, order):
        dtheta[k] = theta[k - 1] - theta[k]
    div = 1.0 / (order - 1)
    theta[order - 1] = div * w * theta[order - 2]
    for l in range(1, order - 1):
        theta[order - l - 1] = div * ((w + l) * theta[order - l - 2] + (order - l - w) * theta[order - l - 1])
    theta[0] = div * (1.0 - w) * theta[0]
    return int(fl)


@jit
def _indices(fl, order, origin, size, wraps, grid, out):
    """Brick indices of the ``order`` points from floor ``fl``; False when one is outside the brick."""
    first = fl - order + 1
    for j in range(order):
        g = first + j
        if wraps:
            g %= grid
        else:
            g -= origin
            if g < 0 or g >= size:
                return False
        out[j] = g
    return True


@jit
def spread(x, q, nlocal, scale, origin, wraps, grid, brick, order):
    """Charges of the local atoms onto ``brick`` (zeroed first); returns atoms whose splines leave it."""
    brick[:] = 0.0
    tx, ty, tz = np.empty(order), np.empty(order), np.empty(order)
    dt = np.empty(order)
    ix, iy, iz = (np.empty(order, dtype=np.int64), np.empty(order, dtype=np.int64),
                  np.empty(order, dtype=np.int64))
    nz, ny, nx = brick.shape
    flat = brick.reshape(-1)  # flat indices: a view per row in the inner loops costs more than the arithmetic
    outside = 0
    for i in range(nlocal):
        qi = q[i]
        fx = _weights(x[i, 0] * scale[0], order, tx, dt)
        fy = _weights(x[i, 1] * scale[1], order, ty, dt)
        fz = _weights(x[i, 2] * scale[2], order, tz, dt)
        if not (_indices(fx, order, origin[0], nx, wraps[0], grid[0], ix)
                and _indices(fy, order, origin[1], ny, wraps[1], grid[1], iy)
                and _indices(fz, order, origin[2], nz, wraps[2], grid[2], iz)):
            outside += 1
            continue
        for c in range(order):
            wz = qi * tz[c]
            for b in range(order):
                wzy = wz * ty[b]
                row = (iz[c] * ny + iy[b]) * nx
                for a in range(order):
                    flat[row + ix[a]] += wzy * tx[a]
    return outside


@jit
def gather(x, q, nlocal, scale, origin, wraps, grid, phi, order, f, factor):
    """Forces -dE/dx of the local atoms from the convolved grid ``phi`` (same brick as ``spread``), times
    ``factor`` (the multiple-time-step weight), added to ``f``."""
    tx, ty, tz = np.empty(order), np.empty(order), np.empty(order)
    dx, dy, dz = np.empty(order), np.empty(order), np.empty(order)
    ix, iy, iz = (np.empty(order, dtype=np.int64), np.empty(order, dtype=np.int64),
                  np.empty(order, dtype=np.int64))
    nz, ny, nx = phi.shape
    flat = phi.reshape(-1)
    for i in range(nlocal):
        fx = _weights(x[i, 0] * scale[0], order, tx, dx)
        fy = _weights(x[i, 1] * scale[1], order, ty, dy)
        fz = _weights(x[i, 2] * scale[2], order, tz, dz)
        if not (_indices(fx, order, origin[0], nx, wraps[0], grid[0], ix)
                and _indices(fy, order, origin[1], ny, wraps[1], grid[1], iy)
                and _indices(fz, order, origin[2], nz, wraps[2], grid[2], iz)):
            continue
        gx, gy, gz = 0.0, 0.0, 0.0
        for c in range(order):
            for b in range(order):
                row = (iz[c] * ny + iy[b]) * nx
                sx, sdx = 0.0, 0.0
                for a in range(order):
                    p = flat[row + ix[a]]
                    sx += tx[a] * p
                    sdx += dx[a] * p
                gx += sdx * ty[b] * tz[c]
                gy += sx * dy[b] * tz[c]
                gz += sx * ty[b] * dz[c]
        s = -q[i] * factor
        f[i, 0] += s * gx * scale[0]
        f[i, 1] += s * gy * scale[1]
        f[i, 2] += s * gz * scale[2]


@jit
def pack_planes(brick, planes, buf, at):
    """Brick planes ``planes`` (z indices) into ``buf`` from ``at``, then their sum (the checksum); returns the
    end."""
    ny, nx = brick.shape[1], brick.shape[2]
    start = at
    for p in planes:
        for j in range(ny):
            for i in range(nx):
                buf[at] = brick[p, j, i]
                at += 1
    total = 0.0
    for k in range(start, at):
        total += buf[k]
    buf[at] = total
    return at + 1


@jit
def add_planes(slab, zfirst, gz0, gridz, planes, ny, nx, y0, x0, gridy, gridx, buf, at):
    """Planes packed by ``pack_planes`` (of a brick ``ny`` by ``nx`` whose index 0 is grid point ``y0``, ``x0``
    and plane 0 grid plane ``gz0``) added into ``slab`` (plane 0 = grid plane ``zfirst``), wrapping in y and x.
    Returns (end, whether the checksum matched)."""
    total = 0.0
    for p in planes:
        zl = (gz0 + p) % gridz - zfirst
        for j in range(ny):
            gy = (y0 + j) % gridy
            row = slab[zl, gy]
            for i in range(nx):
                v = buf[at]
                total += v
                row[(x0 + i) % gridx] += v
                at += 1
    return at + 1, total == buf[at]


@jit
def pack_from_slab(slab, zfirst, gz0, gridz, planes, ny, nx, y0, x0, gridy, gridx, buf, at):
    """The reverse of ``add_planes``: the slab's values at a brick's planes, into ``buf``, then the checksum."""
    start = at
    for p in planes:
        zl = (gz0 + p) % gridz - zfirst
        for j in range(ny):
            row = slab[zl, (y0 + j) % gridy]
            for i in range(nx):
                buf[at] = row[(x0 + i) % gridx]
                at += 1
    total = 0.0
    for k in range(start, at):
        total += buf[k]
    buf[at] = total
    return at + 1


@jit
def unpack_planes(brick, planes, buf, at):
    """The reverse of ``pack_planes``: planes from ``buf`` into the brick; (end, whether the checksum matched)."""
    ny, nx = brick.shape[1], brick.shape[2]
    total = 0.0
    for p in planes:
        for j in range(ny):
            for i in range(nx):
                v = buf[at]
                total += v
                brick[p, j, i] = v
                at += 1
    return at + 1, total == buf[at]


def warm_up() -> None:
    """Compile (or load from cache) every function with the types the kernel passes."""
    x = np.array([[0.5, 0.6, 0.7], [1.5, 1.2, 0.2]])
    q = np.array([1.0, -1.0])
    scale = np.ones(3)
    origin = np.zeros(3, dtype=np.int64)
    wraps = np.ones(3, dtype=np.bool_)
    grid = np.full(3, 4, dtype=np.int64)
    brick = np.zeros((4, 4, 4))
    spread(x, q, 2, scale, origin, wraps, grid, brick, 4)
    f = np.zeros_like(x)
    gather(x, q, 2, scale, origin, wraps, grid, brick, 4, f, 1.0)
    planes = np.arange(2, dtype=np.int64)
    buf = np.zeros(100)
    pack_planes(brick, planes, buf, 0)
    add_planes(brick, 0, 0, 4, planes, 4, 4, 0, 0, 4, 4, buf, 0)
    pack_from_slab(brick, 0, 0, 4, planes, 4, 4, 0, 0, 4, 4, buf, 0)
    unpack_planes(brick, planes, buf, 0)
