"""The world-size guard of application runs, through the real CLI: an MPICH program that a launcher of
Open MPI starts as singletons fails the run, naming the world it saw; under its own MPI it passes, and
the record names the MPI library its ranks loaded, as a kernel's record does."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import LAUNCHERS_OF, LIBRARY, cli

pytestmark = pytest.mark.timeout(120)

PATTERN = re.compile(r"the program's ranks saw a world of 1, not 2: were they started by a launcher of another "
                     r"MPI\? \(launcher: Open MPI 5\.[0-9.]+; ranks loaded MPICH [0-9.]+\)")


def script(tmp_path: Path, program: str) -> Path:
    """A shell script that starts ``program``: no ELF for --mpi auto to read the program's MPI from."""
    path = tmp_path / "hello.sh"
    path.write_text(f'#!/bin/sh\nexec {program} "$@"\n')
    path.chmod(0o755)
    return path


def one_record(store: Path) -> dict:
    (record,) = [json.loads(line) for line in store.read_text().splitlines()]
    return record


def mpich_version() -> str:
    """MPICH's version as its own launcher prints it ("Version:        4.0.2")."""
    out = subprocess.run([LAUNCHERS_OF["mpich"], "--version"], capture_output=True, text=True, timeout=30).stdout
    return re.search(r"Version:\s*(\S+)", out).group(1)


@pytest.fixture
def mpich_script(hello_of, tmp_path):
    if not os.access(LAUNCHERS_OF["mpich"], os.X_OK):
        pytest.skip(f"MPI flavours tier: {LAUNCHERS_OF['mpich']} is missing")
    return script(tmp_path, hello_of("mpich"))


def test_exec_record_fails_an_mpich_program_started_by_open_mpi(mpich_script, tmp_path):
    store = tmp_path / "s.jsonl"
    proc = cli(sys.executable, "exec", "--topology", "native", "--ranks", 2, "--record", "--store", store,
               "--mpi", "openmpi", "--", mpich_script, cwd=tmp_path)
    assert proc.stdout.count("rank 0 of 1") == 2, proc.stdout  # what the guard is for: singletons, exit 0
    assert proc.returncode == 1, proc.stderr[-2000:]
    record = one_record(store)
    assert record["status"] == "failed" and record["exit_status"] == 0
    assert PATTERN.fullmatch(record["validation"]["detail"]), record["validation"]
    assert PATTERN.search(proc.stderr)
    assert record["world_guard"] == {"available": True, "observed": True, "processes": 2, "worlds": [1],
                                     "ranks_seen": [0], "spawned": 0}
    assert record["environment"]["versions"]["mpi"] == f"MPICH {mpich_version()}"


def test_run_app_fails_it_under_auto_which_cannot_read_a_scripts_mpi(mpich_script, tmp_path):
    app = tmp_path / "hello.yaml"
    app.write_text("name: hello\ncommand: [./hello.sh]\nsuccess: 'rank \\d+ of'\n")
    store = tmp_path / "s.jsonl"
    proc = cli(sys.executable, "run", "--app", app, "--ranks", 2, "--store", store)  # --mpi auto: the default
    assert proc.returncode == 1, proc.stderr[-2000:]
    record = one_record(store)
    assert record["status"] == "failed" and PATTERN.fullmatch(record["validation"]["detail"])


def test_the_same_script_under_mpich_passes_and_records_its_library(mpich_script, tmp_path):
    store = tmp_path / "s.jsonl"
    proc = cli(sys.executable, "exec", "--topology", "native", "--ranks", 2, "--record", "--store", store,
               "--mpi", "mpich", "--", mpich_script, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(re.findall(r"rank \d of \d", proc.stdout)) == ["rank 0 of 2", "rank 1 of 2"]
    record = one_record(store)
    assert record["status"] == "ok", record["validation"]
    assert record["world_guard"]["worlds"] == [2] and record["world_guard"]["ranks_seen"] == [0, 1]
    assert record["environment"]["mpi_library"].startswith(LIBRARY["mpich"])
    assert record["environment"]["versions"]["mpi"] == f"MPICH {mpich_version()}"


def test_an_open_mpi_5_program_passes_under_the_default(tmp_path):
    store = tmp_path / "s.jsonl"
    proc = cli(sys.executable, "exec", "--topology", "native", "--ranks", 2, "--record", "--store", store, "--",
               sys.executable, "-c", "from mpi4py import MPI; print('size', MPI.COMM_WORLD.Get_size())", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("size 2") == 2
    record = one_record(store)
    assert record["status"] == "ok" and record["world_guard"]["worlds"] == [2]
    assert record["environment"]["mpi_library"].startswith(LIBRARY["openmpi5"])
    assert record["environment"]["versions"]["mpi"].startswith("Open MPI 5.")


FORTRAN = {  # both bindings' init entry points: mpi_init_ and mpi_init_f08_ (ierror optional)
    "mpif.h": "program hello\n  implicit none\n  include 'mpif.h'\n  integer :: ierr\n  call MPI_Init(ierr)\n"
              "  call MPI_Finalize(ierr)\nend program\n",
    "mpi_f08": "program hello\n  use mpi_f08\n  implicit none\n  call MPI_Init()\n  call MPI_Finalize()\nend program\n",
}


@pytest.mark.parametrize("binding", list(FORTRAN))
def test_a_fortran_mpich_program_is_seen_too(binding, mpich_script, tmp_path):
    mpif90 = "/usr/bin/mpif90.mpich"
    if not os.access(mpif90, os.X_OK):
        pytest.skip(f"MPI flavours tier: {mpif90} is missing")
    source = tmp_path / "hello.f90"
    source.write_text(FORTRAN[binding])
    built = subprocess.run([mpif90, "-o", str(tmp_path / "fhello"), str(source)], capture_output=True, text=True,
                           timeout=120)
    if built.returncode != 0:
        pytest.skip(f"MPI flavours tier: {mpif90} cannot build {binding}: {built.stderr[-300:]}")
    store = tmp_path / "s.jsonl"
    proc = cli(sys.executable, "exec", "--topology", "native", "--ranks", 2, "--record", "--store", store,
               "--mpi", "openmpi", "--", script(tmp_path, tmp_path / "fhello"), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert PATTERN.fullmatch(one_record(store)["validation"]["detail"])


def test_a_program_that_is_no_mpi_program_is_not_observed_and_not_failed(tmp_path):
    """And its output path is no input: before, exec --record refused what plain exec runs (exit 2)."""
    (tmp_path / "out").mkdir()
    store = tmp_path / "s.jsonl"
    proc = cli(sys.executable, "exec", "--topology", "native", "--ranks", 2, "--record", "--store", store, "--",
               "sh", "-c", f"echo 1 >> {tmp_path}/out/out.txt", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "out" / "out.txt").read_text() == "1\n1\n"
    record = one_record(store)
    assert record["status"] == "ok" and record["world_guard"]["observed"] is False
    assert "world size not observed (no process called MPI_Init)" in record["validation"]["detail"]
    assert record["environment"]["versions"]["mpi"] is None
