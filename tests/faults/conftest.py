"""The faults campaign: real runs, broken on purpose, and a host that must be as it was afterwards.

``clean_host`` snapshots everything vnetbench could leave behind (its interfaces, namespaces,
qdiscs, mounts, cgroups, state directories, the MPI and vnetbench processes the test started, its
files in /tmp, /var/tmp and /dev/shm and the test's own TMPDIR) before the test and compares after
it, giving killed processes a few seconds to be reaped. When the host is not clean the test fails,
naming what is left; exactly those leftovers are then removed so that the next test starts clean.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from emulation.conftest import WHY_NOT, requires_netns  # noqa: F401 (re-exported for the tests)
from harness import hoststate



@pytest.fixture
def clean_host(tmp_path_factory):
    """The host as the test found it, afterwards - judged by what is the test's and vnetbench's alone
    (hoststate.Watch): other programs' files, links, MPI jobs and VMs may come and go meanwhile."""
    tmp_path_factory.getbasetemp()  # pytest's own temporary tree, settled before the Watch sets TMPDIR
    with hoststate.Watch() as watch:
        yield watch.before
        left = watch.leftovers()
        if left:
            watch.remove(left)
    assert not left, "the host is not as it was: " + json.dumps(left, indent=1)


def start(*args, **kwargs) -> subprocess.Popen:
    """The real ``vnetbench`` command, started in a session of its own (so that a test can signal
    it as a terminal would, and kill it without killing itself). Its output goes to unnamed
    temporary files, which ``finish`` reads: a pipe nobody reads would stall it."""
    out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    proc = subprocess.Popen([sys.executable, "-m", "vnetbench", *map(str, args)], stdout=out, stderr=err,
                            text=True, start_new_session=True, **kwargs)
    proc.outputs = (out, err)
    return proc


def wait_for(condition, timeout: float, what: str, interval: float = 0.005):
    """Poll ``condition()`` until it returns something true; that value. Fails the test naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    pytest.fail(f"gave up after {timeout:g} s waiting for {what}")


def rank_pids() -> dict[int, int]:
    """{MPI rank: pid} of the vnetbench kernel ranks running on this host (inside VMs or not)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if b"vnetbench.kernels" not in (entry / "cmdline").read_bytes():
                continue
            env = dict(item.split(b"=", 1) for item in (entry / "environ").read_bytes().split(b"\0") if b"=" in item)
        except OSError:
            continue
        rank = env.get(b"OMPI_COMM_WORLD_RANK")
        if rank is not None:
            found[int(rank)] = int(entry.name)
    return found


def finish(proc: subprocess.Popen, timeout: float) -> tuple[int, str, str, float]:
    """(exit code, stdout, stderr, seconds it took to end from now) of a process from ``start``."""
    started = time.monotonic()
    try:
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    texts = []
    for handle in proc.outputs:
        handle.seek(0)
        texts.append(handle.read())
        handle.close()
    return proc.returncode, texts[0], texts[1], time.monotonic() - started


def records(store: Path) -> list[dict]:
    """The store's whole records: a line still being appended while the test polls (no newline yet) is not one."""
    return [json.loads(line) for line in store.read_text().split("\n")[:-1]] if store.exists() else []
