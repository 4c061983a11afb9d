"""Bounded reading: devices, FIFOs and directories refused where a file is expected (exit 2, at once);
an overlong line is a bad line named by its number, skipped without being held whole."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import vnetbench
from vnetbench.core.store import Store
from vnetbench.core.files import MAX_LINE

STORES = Path(__file__).resolve().parent.parent / "data" / "stores"
sys.path.insert(0, str(STORES))
sys.path.insert(0, str(STORES.parents[2] / "benchmarks"))
import craft  # noqa: E402
from store_memory import own_peak  # noqa: E402


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def not_regular(tmp_path, fifo):
    # a FIFO with no writer would block an open() for reading forever; /dev/zero would never end
    return [("/dev/zero", "a character device"), ("/dev/urandom", "a character device"),
            (fifo, "a FIFO"), (tmp_path, "a directory")]


@pytest.mark.parametrize("command", ["report", "compare", "ingest"])
def test_non_regular_inputs_refused_with_exit_2(command, tmp_path, fifo):
    for path, kind in not_regular(tmp_path, fifo):
        argv = {"report": ["report", "--store", path], "compare": ["compare", path, STORES / "study.jsonl"],
                "ingest": ["ingest", path, "--store", tmp_path / "s.jsonl"]}[command]
        proc = vnetbench(*argv, timeout=30)
        assert proc.returncode == 2, (path, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and f"{path} is {kind}" in lines[0], (path, proc.stderr)
        assert not (tmp_path / "s.jsonl").exists()


def test_run_refuses_a_device_as_store(tmp_path):
    proc = vnetbench("run", "halo", "--store", "/dev/null", timeout=30)
    assert proc.returncode == 2 and "--store: /dev/null is not a regular file" in proc.stderr


def test_overlong_line_is_a_bad_line_named_and_not_held(tmp_path):
    records = craft.halo("native", 2, [1.0, 2.0])
    store = tmp_path / "s.jsonl"
    with open(store, "wb") as handle:
        handle.write(json.dumps(records[0]).encode() + b"\n")
        # 3 x MAX_LINE of one line (a JSON string, so it would parse if read whole)
        handle.write(b'{"x": "' + b"a" * (3 * MAX_LINE) + b'"}\n')
        handle.write(json.dumps(records[1]).encode() + b"\n")
    # the report's own peak memory (ru_maxrss would not do: Linux carries the forking parent's high-water
    # mark into the child's, and pytest is large by then)
    peak_mib, _, _, out, err = own_peak(["report", "--store", store], tmp_path, timeout=120)
    assert f"s.jsonl:2: skipped: longer than {MAX_LINE >> 20} MiB" in err
    assert "native" in out
    loaded = Store(store).scan()
    assert len(loaded[0]) == 2 and [b.line for b in loaded[1]] == [2]
    # the line is 12 MiB; a reader holding it whole (bytes, then str, then the parse) takes 3 times that
    # beside the ~50 MiB the command needs anyway
    assert peak_mib < 80, peak_mib


def test_ingest_names_the_overlong_line(tmp_path):
    record = tmp_path / "r.json"
    record.write_bytes(b"a" * (MAX_LINE + 10) + b"\n")
    proc = vnetbench("ingest", record, "--store", tmp_path / "s.jsonl")
    assert proc.returncode == 2
    assert f"{record}:1: longer than {MAX_LINE >> 20} MiB" in proc.stderr
    assert not (tmp_path / "s.jsonl").exists()


def test_fifo_with_a_writer_is_still_refused(tmp_path, fifo):
    # even a FIFO that would deliver records is refused: a store is a file that can be read again
    writer = subprocess.Popen(["sh", "-c", f"sleep 20 > {fifo}"])
    try:
        proc = vnetbench("report", "--store", fifo, timeout=30)
        assert proc.returncode == 2 and "is a FIFO" in proc.stderr
    finally:
        writer.kill()
        writer.wait(timeout=10)
