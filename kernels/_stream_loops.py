"""STREAM's four loops, compiled with numba so that each is one fused pass like the C original.

numpy's ``b + s*c`` makes a temporary and walks memory twice (about 60% of C STREAM);
a fused loop reaches C speed. Copy is the exception: stream.c's compiler sees three distinct
arrays and turns Copy's loop into a call to libc's memcpy, so ours calls the same memcpy.
Imported only by ranks: importing numba is slow and the launcher never needs it.
"""

import os

import numba
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def _cache_usable() -> bool:
    """Whether numba can keep compiled code beside this file or in the user's cache dir."""
    here = os.path.dirname(os.path.abspath(__file__))
    pycache = os.path.join(here, "__pycache__")
    if os.access(pycache if os.path.isdir(pycache) else here, os.W_OK):
        return True
    home_cache = os.path.join(os.path.expanduser("~"), ".cache")
    return os.access(home_cache if os.path.isdir(home_cache) else os.path.expanduser("~"), os.W_OK)


def _ensure_cache_dir() -> None:
    # an install in a read-only prefix, with HOME read-only or unset (as under some launch agents), would make
    # numba refuse cache=True: the cache then lives in vnetbench's own state root (rundir: a folder of this user's
    # that nobody else can write, checked, never followed through a symlink). numba's cache holds pickles, so a
    # folder another user could plant (a fixed name under /tmp) would be code run as this user; where no private
    # folder can be had, every start compiles afresh
    if numba.config.CACHE_DIR or _cache_usable():
        return
    from vnetbench.core import rundir
    from vnetbench.core.errors import LaunchError

    try:
        path = rundir.cache_dir() / "numba"
        rundir.private_dir(path)
    except (OSError, LaunchError):
        return
    os.environ["NUMBA_CACHE_DIR"] = str(path)
    numba.config.CACHE_DIR = str(path)


def jit(func=None, *, fastmath=False):
    """``numba.njit`` with caching where a cache can live; strict IEEE arithmetic unless asked."""
    if func is None:
        return lambda f: jit(f, fastmath=fastmath)
    _ensure_cache_dir()
    try:
        return numba.njit(cache=True, fastmath=fastmath)(func)
    except RuntimeError:  # "no locator available": compile on every start rather than fail
        return numba.njit(cache=False, fastmath=fastmath)(func)


@intrinsic
def _memcpy(typingctx, dst, src, count):
    """libc's memcpy of ``count`` elements from ``src``'s data to ``dst``'s (contiguous arrays)."""
    if not (isinstance(dst, types.Array) and isinstance(src, types.Array) and dst.dtype == src.dtype
            and dst.layout == "C" and src.layout == "C"):
        return None

    def codegen(context, builder, signature, args):
        dst_array = context.make_array(signature.args[0])(context, builder, args[0])
        src_array = context.make_array(signature.args[1])(context, builder, args[1])
        itemsize = context.get_abi_sizeof(context.get_data_type(signature.args[0].dtype))
        # llvm.memcpy with a length known only at run time is lowered to a call of the
        # process's memcpy: the libc entry point stream.c calls, resolved for this CPU as there
        cgutils.raw_memcpy(builder, dst_array.data, src_array.data, args[2], itemsize)
        return context.get_dummy_value()

    return types.void(dst, src, types.intp), codegen


@jit
def copy(c, a):
    # gcc (-O2 and up, with or without OpenMP) compiles stream.c's Copy loop into `call memcpy`:
    # its arrays are distinct static objects. For arrays this large libc's memcpy chooses a
    # strategy per CPU that a plain load/store loop does not have: x86-64 glibc switches to
    # non-temporal stores above a threshold taken from the cache sizes, which skip the read a
    # plain store makes of each destination line (our loop's Copy was 0.70 of stream.c's on an
    # AMD EPYC); other CPUs and libcs choose otherwise. Calling that same memcpy gives Copy the
    # same code as stream.c on any CPU, whatever libc decides there.
    n = a.shape[0]
    nbytes = n * a.itemsize
    dst, src = c.ctypes.data, a.ctypes.data
    if dst + nbytes <= src or src + nbytes <= dst:
        _memcpy(c, a, n)
    else:  # memcpy is undefined on overlap; keep the loop's element-by-element meaning
        for j in range(n):
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
