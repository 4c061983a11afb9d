"""Where the ranks' numba cache lives when neither the install nor ~/.cache is writable: a private folder of the
user's, never a fixed name under /tmp that another user could plant (numba's cache holds pickles: code)."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

NOBODY = 65534
PROBE = """
import numba, numpy as np
from vnetbench.kernels._stream_loops import jit

@jit
def triad(a, b, c, s):
    for i in range(a.size):
        a[i] = b[i] + s * c[i]

a = np.zeros(4); triad(a, np.ones(4), np.ones(4), 2.0)
assert a.tolist() == [3.0] * 4
print(numba.config.CACHE_DIR or "-")
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root to run the ranks' code as another user (nobody) with no writable home")
def test_planted_symlinks_under_tmp_are_never_followed():
    # a /tmp of the test's own (world-writable and sticky like /tmp): nobody can reach it, and the host's is untouched
    tmp = Path(tempfile.mkdtemp(prefix="vnb-numba-probe-"))
    try:
        tmp.chmod(0o1777)
        # numba caches only functions of a file (not of ``python -c``): the probe is one, in a folder of root's
        (tmp / "probe").mkdir(mode=0o755)
        (tmp / "probe" / "probe.py").write_text(PROBE)
        planted = {}
        # the old fixed path, and the state root a user without XDG_RUNTIME_DIR gets: both planted by "another user"
        for name in (f"vnetbench-numba-{NOBODY}", f"vnetbench-{NOBODY}"):
            target = tmp / f"planted-{name}"
            target.mkdir()
            target.chmod(0o777)
            (tmp / name).symlink_to(target)
            planted[name] = target

        def probe() -> str:
            # nobody: the install is root's and HOME does not exist, so numba needs the fallback for real
            env = {"PATH": os.environ["PATH"], "HOME": "/nonexistent", "TMPDIR": str(tmp)}
            argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", sys.executable,
                    str(tmp / "probe" / "probe.py")]
            done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr
            return done.stdout.strip()

        # the state root is a symlink: refused, so no cache at all (compiled afresh), and nothing written through it
        assert probe() == "-"
        for target in planted.values():
            assert list(target.iterdir()) == [], target

        # without the plant at the state root: the cache is a private folder of nobody's inside it
        (tmp / f"vnetbench-{NOBODY}").unlink()
        cache = Path(probe())
        assert cache == tmp / f"vnetbench-{NOBODY}" / ".cache" / "numba"
        for folder in (cache, cache.parent, cache.parent.parent):
            info = folder.lstat()
            assert folder.is_dir() and not folder.is_symlink() and info.st_uid == NOBODY, folder
            assert info.st_mode & 0o077 == 0, oct(info.st_mode)
        assert any(cache.rglob("*.nbi")), "numba kept nothing in its cache"
        assert list(planted[f"vnetbench-numba-{NOBODY}"].iterdir()) == []
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
