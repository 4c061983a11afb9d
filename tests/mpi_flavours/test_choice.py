"""--mpi: flavours read from the real launchers, programs' MPI from their ELF, mismatches refused before
anything starts, and ranks that do not join one world failing the run."""

import json
import os
import re
import subprocess
import sys

import pytest

from vnetbench import flavours, linkage, mpiselect

from .conftest import FLAVOURS, TINY, cli
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


def test_kernels_refuse_a_launcher_their_mpi4py_cannot_run_under(python_of, tmp_path):
    python = python_of("mpich")
    proc = cli(python, "run", "allreduce", "--ranks", "2", "--mpi", "openmpi", "--store", tmp_path / "s.jsonl",
               *TINY["allreduce"])
    assert proc.returncode == 2, proc.stderr
    assert "is built against the MPICH ABI (libmpi" in proc.stderr and "but --mpi is Open MPI" in proc.stderr
    assert not (tmp_path / "s.jsonl").exists()


@pytest.mark.timeout(120)
def test_ranks_that_are_singletons_fail_the_run():
    """The last guard: Hydra starting ranks whose mpi4py loads Open MPI gives two worlds of one rank."""
    if not os.access(LAUNCHERS["mpich"], os.X_OK):
        pytest.skip("MPICH is missing")
    from vnetbench import runner, topologies

    hydra = flavours.detect(LAUNCHERS["mpich"])  # the library API, below the --mpi check
    with topologies.realise(topologies.load("native")) as up:
        spec = up.launch(2, None)
        params = {**runner.prepare("allreduce", None, 2)[1], "max_size": 64, "iterations": 5, "large_iterations": 2}
        record = runner.run_once(up, spec, "allreduce", params, 2, 0, 60, launcher=hydra)
    assert record["status"] == "failed"
    assert "ranks saw a world of 1 rank(s) (2 result(s)), but 2 were launched with MPICH" in \
        record["validation"]["detail"], json.dumps(record["validation"])
