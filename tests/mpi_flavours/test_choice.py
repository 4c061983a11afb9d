"""--mpi: flavours read from the real launchers, programs' MPI from their ELF, mismatches refused before
anything starts, kernels' ``auto`` (the mpirun on PATH, else the wheel's), and ranks that do not join one world
failing the run."""

import json
import os
import re
import subprocess
import sys

import pytest

from vnetbench.mpi import selection as mpiselect
from vnetbench.mpi import linkage
from vnetbench.mpi import flavours

from .conftest import BIN, FLAVOURS, LIBRARY_FILE, TINY, cli, launcher_of
from .conftest import LAUNCHERS_OF as LAUNCHERS


@pytest.mark.parametrize("name", ["openmpi4", "mpich"])
def test_flavour_and_version_come_from_the_launcher(name):
    if not os.access(LAUNCHERS[name], os.X_OK):
        pytest.skip(f"{LAUNCHERS[name]} is missing")
    launcher = flavours.detect(LAUNCHERS[name])
    assert launcher.name == name
    # the version as the launcher itself prints it, read here with a pattern of the test's own
    printed = subprocess.run([LAUNCHERS[name], "--version"], capture_output=True, text=True, timeout=30).stdout
    pattern = r"\(OpenRTE\) (\d+\.\d+\.\d+)" if name == "openmpi4" else r"HYDRA build details:\s+Version:\s+(\d+\.\d+\S*)"
    assert launcher.version == re.search(pattern, printed).group(1), printed
    if name == "openmpi4":
        assert launcher.version.startswith("4.")


def test_the_wheel_is_open_mpi_5():
    launcher = flavours.detect(os.path.join(os.path.dirname(sys.executable), "mpirun"))
    assert (launcher.name, launcher.runtime) == ("openmpi5", "PRRTE")
    assert launcher.version.startswith("5.")


def test_a_launcher_is_asked_its_version_once_until_it_changes(tmp_path):
    # the real mpirun behind a script that counts how often it is started; detect() is a fresh process's each time
    real = LAUNCHERS["openmpi4"] if os.access(LAUNCHERS["openmpi4"], os.X_OK) else str(BIN / "mpirun")
    counted, script = tmp_path / "started", tmp_path / "mpirun"
    script.write_text(f'#!/bin/sh\necho >> {counted}\nexec {real} "$@"\n')
    script.chmod(0o755)

    def detect() -> flavours.Launcher:
        flavours.detect.cache_clear()
        return flavours.detect(str(script))

    first = detect()
    assert (detect().name, detect().version) == (first.name, first.version) == (flavours.detect(real).name,
                                                                                  flavours.detect(real).version)
    assert counted.read_text().count("\n") == 1, "asked again although the launcher did not change"
    # another file at the same path (an upgrade, another alternative) is asked again
    script.write_text(f'#!/bin/sh\necho >> {counted}\nexec {real} "$@"  \n')
    assert detect().version == first.version and counted.read_text().count("\n") == 2
    # what is kept is only ever the launcher's own answer: one that is no launcher is refused each time
    script.write_text(f"#!/bin/sh\necho >> {counted}\necho 'not an MPI'\n")
    for _ in range(2):
        with pytest.raises(flavours.UsageError, match="is not a launcher vnetbench knows"):
            detect()
    assert counted.read_text().count("\n") == 4


def test_a_program_that_is_no_launcher_is_refused(tmp_path):
    proc = cli(sys.executable, "exec", "--topology", "native", "--ranks", "2", "--mpi", "/bin/true", "--", "true")
    assert proc.returncode == 2, proc.stderr
    assert "--mpi: /bin/true is not a launcher vnetbench knows" in proc.stderr


def test_lammps_is_open_mpi_through_its_elf():
    if not os.path.exists("/usr/bin/lmp"):
        pytest.skip("Debian's lammps is not installed")
    found = linkage.mpi_linkage("/usr/bin/lmp")
    assert (found.family, found.soname) == ("openmpi", "libmpi.so.40")
    assert found.path and os.path.exists(found.path)


@pytest.mark.parametrize("name", ["openmpi4", "mpich"])
def test_auto_picks_the_launcher_of_the_programs_mpi(name, hello_of):
    launcher, needs = mpiselect.choose("auto", hello_of(name))
    assert launcher.name == name
    assert needs.family == launcher.family


def test_the_mismatch_is_refused_with_exit_2_naming_both_sides(hello_of, tmp_path):
    hello = hello_of("mpich")
    proc = cli(sys.executable, "exec", "--topology", "2vm-2vswitch", "--ranks", "2", "--mpi", "openmpi", "--",
               hello)
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert len(proc.stderr.strip().splitlines()) == 1
    assert f"{hello} is linked against the MPICH ABI (libmpich.so.12) but --mpi is Open MPI 5." in line
    assert "use --mpi mpich or --mpi auto" in line
    assert "rank" not in proc.stdout  # nothing started


def test_the_default_comes_from_the_environment(hello_of):
    proc = cli(sys.executable, "exec", "--topology", "native", "--ranks", "2", "--", hello_of("mpich"),
               env={"VNETBENCH_MPI": "openmpi"})
    assert proc.returncode == 2 and "but --mpi is Open MPI" in proc.stderr
    proc = cli(sys.executable, "exec", "--topology", "native", "--ranks", "2", "--", "true",
               env={"VNETBENCH_MPI": "lam"})
    assert proc.returncode == 2 and "VNETBENCH_MPI: 'lam' is not allowed" in proc.stderr


@pytest.mark.timeout(120)
def test_kernels_take_the_mpirun_on_path_under_auto(tmp_path):
    """The mpirun a user would run: here a folder first on PATH whose mpirun is MPICH's Hydra."""
    hydra = launcher_of("mpich")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "mpirun").symlink_to(hydra)
    (tmp_path / "bin" / "hydra_pmi_proxy").symlink_to("/usr/bin/hydra_pmi_proxy")  # Hydra runs it from beside itself
    store = tmp_path / "s.jsonl"
    proc = cli(sys.executable, "run", "allreduce", "--ranks", "2", "--store", store, *TINY["allreduce"],
               env={"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    (record,) = [json.loads(line) for line in store.read_text().splitlines()]
    library = record["launch"]["mpi"]["library"]
    assert record["status"] == "ok" and record["launch"]["mpi"]["flavour"] == "mpich"
    assert library["chosen_by"] == "--mpi auto (the default): the mpirun on PATH", library
    assert library["path"] == os.path.realpath(LIBRARY_FILE["mpich"])
    assert record["environment"]["versions"]["mpi"].startswith("MPICH 4.")


def test_without_mpirun_on_path_auto_is_the_wheel(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing there
    monkeypatch.delenv("VNETBENCH_MPI", raising=False)
    launcher, needs = mpiselect.choose("auto")
    assert (launcher.name, launcher.path) == ("openmpi5", str(BIN / "mpirun"))
    assert launcher.library.chosen_by == "--mpi auto: the wheel's (no mpirun or mpiexec on PATH)"
    assert needs.path == os.path.realpath(LIBRARY_FILE["openmpi5"]) and needs.soname == "libmpi.so.40"


@pytest.mark.parametrize("choice, name", [("openmpi", "openmpi5"), ("mpich", "mpich"),
                                          ("/usr/bin/mpirun.openmpi", "openmpi4")])
def test_kernels_run_under_any_family_with_the_wheel(choice, name, monkeypatch):
    """No refusal for kernels: the wheel loads either ABI, so every launcher is one the kernels can run under."""
    launcher_of(name)
    monkeypatch.delenv("VNETBENCH_MPI", raising=False)
    launcher, needs = mpiselect.choose(choice)
    assert launcher.name == name and needs.family == launcher.family
    assert launcher.describe()["library"]["path"] == os.path.realpath(LIBRARY_FILE[name])


@pytest.mark.timeout(120)
def test_ranks_that_are_singletons_fail_the_run():
    """The last guard: Hydra starting ranks whose mpi4py loads Open MPI gives two worlds of one rank."""
    if not os.access(LAUNCHERS["mpich"], os.X_OK):
        pytest.skip("MPICH is missing")
    from vnetbench import engine, topologies
    from vnetbench.workloads.kernel import KernelWorkload

    hydra = flavours.detect(LAUNCHERS["mpich"])  # the library API, below the --mpi check
    with topologies.realise(topologies.load("native")) as up:
        spec = up.launch(2, None)
        workload = KernelWorkload("allreduce", {"max_size": 64, "iterations": 5, "large_iterations": 2})
        workload.check(2)
        record = engine.run_once(workload, up, spec, 2, 0, 60, hydra)
    assert record["status"] == "failed"
    assert "ranks saw a world of 1 rank(s) (2 result(s)), but 2 were launched with MPICH" in \
        record["validation"]["detail"], json.dumps(record["validation"])
