"""The world-size guard's Python side: its verdict on what the ranks wrote, its build without a compiler,
and the wrapper's preload (the shim itself runs under real MPIs in tests/mpi_flavours/test_world_guard.py)."""

import json
import os

from vnetbench.apps import worldsize, wrapper
from vnetbench.core.rundir import JOB_ENV as ENV

BUILT = worldsize.Guard("/cache/worldsize-0123.so")
MPICH = "MPICH Version:\t4.0.2\nMPICH Release date:\tThu Apr  7 12:34:45 CDT 2022\n"
OPEN_MPI = "Open MPI v5.0.11, package: Open MPI user@localhost Distribution, ident: 5.0.11, repo rev: v5.0.11"


class Launcher:  # what judge reads of a launcher: how it prints
    def __str__(self):
        return "Open MPI 5.0.11"


def seen(world, rank, library=MPICH, **extra):
    return {"schema": 1, "world": world, "rank": rank, "spawned": False, "pid": 100 + rank, "host": "vm",
            "library": library, **extra}


def test_singletons_fail_the_run_naming_the_world_the_launcher_and_the_library():
    verdict = worldsize.judge(BUILT, [seen(1, 0), seen(1, 0)], 2, Launcher())
    assert verdict.problem == ("the program's ranks saw a world of 1, not 2: were they started by a launcher of "
                               "another MPI? (launcher: Open MPI 5.0.11; ranks loaded MPICH 4.0.2)")
    assert verdict.library == MPICH
    assert verdict.record == {"available": True, "observed": True, "processes": 2, "worlds": [1], "ranks_seen": [0],
                              "spawned": 0}


def test_the_launched_world_passes_and_names_the_library_of_rank_0():
    verdict = worldsize.judge(BUILT, [seen(2, 1, "Open MPI v5.0.10"), seen(2, 0, OPEN_MPI)], 2, Launcher())
    assert verdict.problem is None and verdict.notes == []
    assert verdict.library == OPEN_MPI
    assert verdict.record["libraries"] == ["Open MPI v5.0.10", OPEN_MPI]  # two libraries in one job: said


def test_spawned_processes_join_worlds_of_their_own_and_do_not_count():
    verdict = worldsize.judge(BUILT, [seen(2, 0), seen(2, 1), seen(3, 0, spawned=True)], 2, Launcher())
    assert verdict.problem is None and verdict.record["spawned"] == 1 and verdict.record["worlds"] == [2]


def test_a_helper_process_that_starts_mpi_alone_beside_the_ranks_is_noted_not_failed():
    # a script's pre-step (or a worker importing mpi4py) inherits the preload and joins a world of 1
    verdict = worldsize.judge(BUILT, [seen(2, 0), seen(2, 1), seen(1, 0)], 2, Launcher())
    assert verdict.problem is None and verdict.record["worlds"] == [1, 2]
    assert any("also started MPI" in note for note in verdict.notes)


def test_an_mpi_of_an_abi_the_shim_does_not_know_is_not_observed_and_not_failed():
    other = "Some MPI 1.0 (standard ABI)"
    verdict = worldsize.judge(BUILT, [seen(-1, -1, other, abi="unknown"), seen(-1, -1, other, abi="unknown")], 2,
                              Launcher())
    assert verdict.problem is None and verdict.record["observed"] is False
    assert "ABI the guard does not know (Some MPI 1.0 (standard ABI))" in verdict.record["reason"]


def test_a_program_that_never_calls_mpi_init_is_not_observed_and_not_failed():
    verdict = worldsize.judge(BUILT, [], 2, Launcher())
    assert verdict.problem is None and verdict.library is None
    assert verdict.record["observed"] is False and "called MPI_Init" in verdict.record["reason"]
    assert verdict.notes == ["world size not observed (no process called MPI_Init)"]


def test_without_a_compiler_the_guard_is_not_available_and_the_run_goes_on(tmp_path):
    guard = worldsize.build_guard(cc="no-such-cc-vnb", cache=tmp_path / "state" / ".cache")
    assert guard.path is None and guard.reason == "no C compiler (no-such-cc-vnb) on PATH to build the world-size guard"
    verdict = worldsize.judge(guard, [], 2, Launcher())
    assert verdict.problem is None
    assert verdict.record == {"available": False, "reason": guard.reason, "observed": False}
    assert verdict.notes == [f"world size not observed: {guard.reason}"]
    assert not (tmp_path / "state").exists()


def test_read_takes_the_files_it_can_read(tmp_path):
    folder = tmp_path / worldsize.FOLDER
    folder.mkdir()
    (folder / "vm-1.json").write_text(json.dumps(seen(2, 0)))
    (folder / "vm-2.json").write_text('{"world": ')  # cut short
    (folder / "vm-3.json.tmp").write_text(json.dumps(seen(2, 1)))  # not yet renamed
    (folder / "vm-4.json").write_text('["not", "an", "object"]')
    os.mkfifo(folder / "vm-5.json")  # a name the program chose: refused, never waited on
    assert worldsize.read_worlds(tmp_path) == [seen(2, 0)]
    assert worldsize.read_worlds(tmp_path / "nothing") == []


def test_the_wrapper_appends_the_shim_to_ld_preload_and_names_the_folder(tmp_path, monkeypatch):
    shim = tmp_path / "worldsize.so"
    shim.write_bytes(b"")
    monkeypatch.setenv(ENV, str(tmp_path))
    monkeypatch.setenv("LD_PRELOAD", "/opt/tool/libprofiler.so")
    monkeypatch.delenv(worldsize.DIR_ENV, raising=False)
    wrapper.preload(str(shim))

    assert os.environ["LD_PRELOAD"] == f"/opt/tool/libprofiler.so:{shim}"
    assert os.environ[worldsize.DIR_ENV] == str(tmp_path / worldsize.FOLDER)
    assert (tmp_path / worldsize.FOLDER).is_dir()
    monkeypatch.setenv("LD_PRELOAD", "")
    monkeypatch.setenv(ENV, str(tmp_path / "gone"))  # no job folder here (another host): nothing preloaded
    wrapper.preload(str(shim))
    assert os.environ["LD_PRELOAD"] == ""
    assert wrapper.command(["./a.out"], {"A": "1"}, str(shim))[3:] == ["--guard", str(shim), "--env", "A=1", "--",
                                                                       "./a.out"]
