"""The store where flock(2) is unavailable: appends take a lock file beside the store instead.

No file system without flock can be mounted here (no FUSE, no NFS, no Lustre), so flock is made
to fail the way such a file system fails it (ENOLCK) by a preloaded shim, fake_noflock.so,
built in the test's temporary folder: everything else (the CLI, the writes, the lock file) is real.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import vnetbench

STORES = Path(__file__).resolve().parent.parent / "data" / "stores"
sys.path.insert(0, str(STORES))
import craft  # noqa: E402

SHIM = """
#include <errno.h>
int flock(int fd, int operation) { (void)fd; (void)operation; errno = ENOLCK; return -1; }
"""


@pytest.fixture
def fake_noflock(tmp_path) -> dict:
    """The environment of a process whose flock() fails with ENOLCK."""
    if not shutil.which("gcc"):
        pytest.skip("gcc is needed to build the fake_noflock shim")
    source = tmp_path / "fake_noflock.c"
    source.write_text(SHIM)
    library = tmp_path / "fake_noflock.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(library), str(source)], check=True, timeout=60)
    env = dict(os.environ, LD_PRELOAD=str(library))
    probe = subprocess.run([sys.executable, "-c", "import fcntl, sys; fcntl.flock(sys.stdin.fileno(), fcntl.LOCK_EX)"],
                           env=env, stdin=open(source), capture_output=True, text=True, timeout=30)
    assert "No locks available" in probe.stderr, probe.stderr  # the shim is in force
    return env


def record_files(folder: Path, writers: int, each: int) -> list[Path]:
    files = []
    for w in range(writers):
        path = folder / f"records-{w}.jsonl"
        lines = [json.dumps(r | {"run_id": f"w{w}-{r['repetition']}"}) for r in craft.halo("native", 2, [1.0] * each)]
        path.write_text("\n".join(lines) + "\n")
        files.append(path)
    return files


def test_concurrent_appends_without_flock_use_the_lock_file(tmp_path, fake_noflock):
    store = tmp_path / "results.jsonl"
    files = record_files(tmp_path, writers=4, each=150)
    writers = [subprocess.Popen([sys.executable, "-m", "vnetbench", "ingest", str(f), "--store", str(store)],
                                env=fake_noflock, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for f in files]
    try:
        outcomes = [w.communicate(timeout=180) for w in writers]
    finally:
        for w in writers:
            w.kill()
            w.wait()
    assert [w.returncode for w in writers] == [0] * 4, outcomes
    lines = store.read_text().splitlines()
    assert len(lines) == 600
    ids = {(json.loads(line)["run_id"]) for line in lines}  # every line whole and parseable
    assert len(ids) == 600
    assert not (tmp_path / "results.jsonl.lock").exists()  # released after each append
    proc = vnetbench("report", "--store", store, check=0, env=fake_noflock)
    assert "skipped" not in proc.stderr


def test_neither_flock_nor_a_lock_file_is_a_clear_error(tmp_path, fake_noflock):
    store = tmp_path / "results.jsonl"
    (tmp_path / "results.jsonl.lock").mkdir()  # the lock file cannot be created
    files = record_files(tmp_path, writers=1, each=1)
    proc = vnetbench("ingest", files[0], "--store", store, env=fake_noflock)
    assert proc.returncode == 1
    message = proc.stderr.strip().splitlines()[-1]
    assert "flock is unavailable here (No locks available)" in message
    assert "results.jsonl.lock cannot be created" in message
    assert not store.exists()  # nothing is created when the store cannot be locked


def test_an_existing_store_is_left_as_it_was_when_it_cannot_be_locked(tmp_path, fake_noflock):
    store = tmp_path / "results.jsonl"
    earlier = json.dumps(craft.halo("native", 2, [1.0])[0]) + "\n"
    store.write_text(earlier)
    (tmp_path / "results.jsonl.lock").mkdir()
    files = record_files(tmp_path, writers=1, each=1)
    proc = vnetbench("ingest", files[0], "--store", store, env=fake_noflock)
    assert proc.returncode == 1 and "cannot be created" in proc.stderr
    assert store.read_text() == earlier
