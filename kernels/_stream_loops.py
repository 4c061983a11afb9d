"""STREAM's four loops, compiled with numba so that each is one fused pass like the C original.

numpy's ``b + s*c`` makes a temporary and walks memory twice (about 60% of C STREAM);
a fused loop reaches C speed. Imported only by ranks: importing numba is slow and the
launcher never needs it.
"""

import os
import tempfile

import numba


def _cache_usable() -> bool:
    """Whether numba can keep compiled code beside this file or in the user's cache dir."""
    here = os.path.dirname(os.path.abspath(__file__))
    pycache = os.path.join(here, "__pycache__")
    if os.access(pycache if os.path.isdir(pycache) else here, os.W_OK):
        return True
    home_cache = os.path.join(os.path.expanduser("~"), ".cache")
    return os.access(home_cache if os.path.isdir(home_cache) else os.path.expanduser("~"), os.W_OK)


def _ensure_cache_dir() -> None:
    # an install in a read-only prefix, with HOME read-only or unset (as under some launch
    # agents), would make numba refuse cache=True; a per-user temp dir always works
    if numba.config.CACHE_DIR or _cache_usable():
        return
    path = os.path.join(tempfile.gettempdir(), f"vnetbench-numba-{os.getuid()}")
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.environ["NUMBA_CACHE_DIR"] = path
    numba.config.CACHE_DIR = path


def jit(func=None, *, fastmath=False):
    """``numba.njit`` with caching where a cache can live; strict IEEE arithmetic unless asked."""
    if func is None:
        return lambda f: jit(f, fastmath=fastmath)
    _ensure_cache_dir()
    try:
        return numba.njit(cache=True, fastmath=fastmath)(func)
    except RuntimeError:  # "no locator available": compile on every start rather than fail
        return numba.njit(cache=False, fastmath=fastmath)(func)


@jit
def copy(c, a):
    for j in range(a.shape[0]):
        c[j] = a[j]


@jit
def scale(b, c, scalar):
    for j in range(c.shape[0]):
        b[j] = scalar * c[j]


@jit
def add(c, a, b):
    for j in range(a.shape[0]):
        c[j] = a[j] + b[j]


@jit
def triad(a, b, c, scalar):
    for j in range(b.shape[0]):
        a[j] = b[j] + scalar * c[j]


@jit
def fill(x, value):
    # first touch happens here, on the rank's own core, as STREAM's initialisation loop does
    for j in range(x.shape[0]):
        x[j] = value


@jit
def avg_abs_error(x, expected):
    total = 0.0
    for j in range(x.shape[0]):
        total += abs(x[j] - expected)
    return total / x.shape[0]


def warm_up() -> None:
    """Compile (or load from cache) every loop before anything is timed."""
    import numpy as np

    a, b, c = np.ones(16), np.ones(16), np.ones(16)
    fill(a, 1.0)
    copy(c, a)
    scale(b, c, 3.0)
    add(c, a, b)
    triad(a, b, c, 3.0)
    avg_abs_error(a, 1.0)
