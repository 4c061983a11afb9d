"""vnetbench's own state directory (``/run/vnetbench`` as root) and the private run directories in it.

A leaf module (it imports only ``errors`` and ``procs``): the runtime and the backends both use it.
"""

import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

from . import procs
from .errors import LaunchError

ATTEMPTS = 100  # made_in's


# the job directory vnetbench made for a run, as every process of the job sees it (engine.jobs makes it; the ranks
# and an application's wrapper read it)
JOB_ENV = "VNETBENCH_JOB_DIR"


def state_root() -> Path:
    """vnetbench's own state directory: /run/vnetbench as root, else a private per-user one."""
    if os.geteuid() == 0:
        return Path("/run/vnetbench")
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return Path(runtime) / "vnetbench"
    import tempfile  # here: the modules a run's start imports are milliseconds of every launch

    return Path(tempfile.gettempdir()) / f"vnetbench-{os.getuid()}"


def private_dir(path: Path) -> None:
    """``path`` as a directory of ours that nobody else can write, creating it when missing."""
    try:
        path.mkdir(mode=0o700 if os.geteuid() else 0o755)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise LaunchError(f"{path} is not a private directory of this user; remove it or fix its owner and mode")


def made_in(folders: tuple[Path, ...], make: Callable[[], object] = lambda: None):
    """``make()`` once each of ``folders`` (each the parent of the next) is a private directory of ours. Another
    vnetbench ending its job or run removes these folders when they are empty (``remove_dir``, ``jobs.end``), and
    may do so between this one's making them and ``make``'s using them: all are made again then (each time
    another vnetbench ended a run meanwhile: one that ends runs back to back can take several turns)."""
    turns = ATTEMPTS
    while True:
        try:
            for folder in folders:
                private_dir(folder)
            return make()
        except FileNotFoundError:
            turns -= 1
            if not turns:
                raise


def cache_dir(make: bool = True) -> Path:
    """vnetbench's cache in the state root (hidden: the root's visible entries are topologies and jobs); with
    ``make``, both made private folders of this user's when missing (LaunchError when either is not)."""
    cache = state_root() / ".cache"
    if make:
        made_in((cache.parent, cache))
    return cache


def make_dir(kind: str) -> Path:
    """A new private directory in the state root for files a run needs (hostfiles, ...), named
    after this process so that ``jobs.sweep_orphans`` can remove it once the process is gone."""
    import tempfile

    root = state_root()
    prefix = f"{kind}-{os.getpid()}-{procs.start_time(os.getpid())}-"
    return made_in((root,), lambda: Path(tempfile.mkdtemp(prefix=prefix, dir=root)))


def remove_dir(path: Path) -> None:
    """Remove a directory from ``make_dir``, and the state root with it when nothing else is there."""
    shutil.rmtree(path, ignore_errors=True)
    try:
        os.rmdir(path.parent)
    except OSError:
        pass
