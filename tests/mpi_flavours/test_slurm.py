"""Slurm with each MPI: a kernel run in an allocation of a real Slurm cluster (two nodes on two switches), the ranks
started as the site starts them (srun with the MPI's PMI, else its own launcher), each loading the library --mpi
named, found again on its node; a library that is not the one named fails the run the same way as natively."""

import json
import os
import shlex
import subprocess
import sys

import pytest

from harness.slurm_cluster import SlurmCluster, missing_requirements

from .conftest import LAUNCHERS_OF, LIBRARY_FILE, TINY, WRONG

pytestmark = [pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def cluster():
    reason = missing_requirements()
    if reason:
        pytest.skip(f"Slurm: {reason}")
    with SlurmCluster(switches=2, per_switch=1) as up:
        yield up


def inside_an_allocation(cluster, tmp_path, runs: dict[str, tuple[str, str]]) -> dict[str, tuple[int, dict]]:
    """name -> (exit code, record) of ``run allreduce --topology slurm:PARTITION[STARTER] --mpi LAUNCHER`` for each
    name -> (STARTER, LAUNCHER) of ``runs``, typed in the shell salloc gives (2 nodes on 2 switches): the ranks
    start on Slurm's nodes as the site starts them ('': srun with the MPI's PMI when offered; '@mpirun')."""
    py = shlex.quote(sys.executable)
    smoke = shlex.join(TINY["allreduce"])
    lines = [f"cd {shlex.quote(str(tmp_path))}"]
    for name, (starter, launcher) in runs.items():
        lines.append(f"{py} -m vnetbench run allreduce --ranks 2 --topology slurm:{cluster.partition}{starter} "
                     f"--mpi {shlex.quote(launcher)} --timeout 60 --store {name}.jsonl {smoke} 2> {name}.err; "
                     f"echo $? > {name}.rc")
    (tmp_path / "inside.sh").write_text("\n".join(lines) + "\n")
    done = subprocess.run(["salloc", "--nodes=2", "--ntasks=2", "--switches=2", f"--partition={cluster.partition}",
                           "sh", str(tmp_path / "inside.sh")], env=cluster.env(), capture_output=True, text=True,
                          timeout=170)
    assert done.returncode == 0, done.stderr[-3000:]
    out = {}
    for name in runs:
        err = (tmp_path / f"{name}.err").read_text()
        assert (tmp_path / f"{name}.jsonl").exists(), (name, err[-3000:])
        (record,) = [json.loads(line) for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()]
        out[name] = int((tmp_path / f"{name}.rc").read_text()), record
    return out


def test_kernels_in_an_allocation_load_the_named_library(cluster, wrong_install, tmp_path):
    cluster.settle()
    launchers = {name: path for name, path in LAUNCHERS_OF.items() if os.access(path, os.X_OK)}
    wrong = wrong_install("openmpi4") if "openmpi4" in launchers else None
    runs = {**{name: ("", path) for name, path in launchers.items()},
            # MPICH's own mpiexec inside the allocation is the Slurm backend's matter (its proxies call back to
            # mpiexec's hostname, which these nodes cannot reach): srun starts MPICH's ranks here
            **{f"{name}@mpirun": ("@mpirun", path) for name, path in launchers.items() if name != "mpich"},
            **({"wrong": ("", wrong)} if wrong else {})}
    ran = inside_an_allocation(cluster, tmp_path, runs)
    for name, (starter, launcher) in runs.items():
        if name == "wrong":
            continue
        name = name.removesuffix("@mpirun")
        code, record = ran[name + starter]
        assert code == 0 and record["status"] == "ok", (name, starter, record["validation"])
        assert len({p["hostname"] for p in record["placement"]}) == 2, record["placement"]
        expected = os.path.realpath(LIBRARY_FILE[name])
        assert [p["mpi_library"] for p in record["placement"]] == [expected, expected], (name, record["placement"])
        assert record["launch"]["mpi"]["library"]["chosen_by"] == f"--mpi {launcher}"
    if wrong:
        code, record = ran["wrong"]
        detail = record["validation"]["detail"]
        assert code == 1 and record["status"] == "failed", detail
        assert f"MPI library: the ranks loaded {WRONG['openmpi4'][2]}" in detail, detail
        assert f"but --mpi named Open MPI 4.1.4 ({wrong}, library from prefix" in detail, detail
