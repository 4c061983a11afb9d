"""The LD_PRELOAD shims vnetbench builds from C (the world-size guard, apps/worldsize.c; the MPI profiler's
interposer, profile/interposer.c): compiled with ``cc`` on first use into the per-user cache, named by the hash of
the source and flags, and found there again."""

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .errors import LaunchError
from .rundir import cache_dir, made_in

COMPILE_TIMEOUT = 120


def compile_cached(source_path: Path, stem: str, what: str, *, cc: str = "cc", cache: Path | None = None,
                   flags: tuple = ()) -> tuple[str | None, str | None]:
    """(path, None) of the shared object built from ``source_path`` with ``cc`` into the per-user cache, named
    ``stem`` and the hash of its source and flags (atomically: a temp file, then rename), or (None, why not).
    ``what`` names it in the reason. The world-size guard's and the profiler's shims are built here."""
    source = source_path.read_bytes()
    cache = cache or cache_dir(make=False)
    digest = hashlib.sha256(source + repr(flags).encode()).hexdigest()[:16] if flags else \
        hashlib.sha256(source).hexdigest()[:16]
    target = cache / f"{stem}-{digest}.so"
    if target.is_file():
        return str(target), None
    compiler = shutil.which(cc)
    if compiler is None:
        return None, f"no C compiler ({cc}) on PATH to build {what}"
    try:
        made_in((cache.parent, cache))
    except (OSError, LaunchError) as exc:
        return None, f"cannot create {cache}: {exc}"
    temp = None
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{stem}-", suffix=".so", dir=cache)
        os.close(fd)
        done = subprocess.run([compiler, *flags, "-shared", "-fPIC", "-O2", "-o", temp, str(source_path), "-ldl"],
                              capture_output=True, text=True, timeout=COMPILE_TIMEOUT)
        if done.returncode != 0:
            error = (done.stderr.strip().splitlines() or ["no message"])[-1]
            return None, f"{compiler} could not build {what}: {error[:300]}"
        os.chmod(temp, 0o755)
        os.replace(temp, target)  # concurrent builders each rename a whole file
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{compiler} could not build {what}: {exc}"
    finally:
        if temp and os.path.exists(temp):
            os.unlink(temp)
    return str(target), None
