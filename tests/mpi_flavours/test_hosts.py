"""The hosts backend with each MPI: the C hello and a kernel over SSH on two real sshd hosts, one world of two
ranks, one rank on each host (hostfile and SSH options in each flavour's own syntax), each rank loading the
named MPI's library as its own host has it installed."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from harness.sshd_hosts import SshdHosts, missing_requirements

from .conftest import LIBRARY_FILE, launcher_of

pytestmark = pytest.mark.timeout(180)

LAUNCHERS = {"openmpi5": None, "openmpi4": "/usr/bin/mpirun.openmpi", "mpich": "/usr/bin/mpiexec.mpich"}


@pytest.fixture(scope="module")
def hosts():
    reason = missing_requirements()
    if reason:
        pytest.skip(f"SSH hosts: {reason}")
    made = SshdHosts(2, mesh=True)
    try:
        made.__enter__()
        yield made
    finally:
        made.close()


def test_hello_on_two_hosts(flavour, hello_of, hosts):
    from vnetbench.engine import jobs, launch
    from vnetbench import topologies
    from vnetbench.mpi import selection as mpiselect
    from vnetbench.mpi import flavours
    from vnetbench.core.records import new_run_id

    hello = hello_of(flavour)
    launcher = mpiselect.find_launcher("openmpi") if flavour == "openmpi5" else flavours.detect(LAUNCHERS[flavour])
    assert launcher.name == flavour
    inventory = hosts.write_inventory(hosts.dir / f"inventory-{flavour}.yml", {"compute": ["h0", "h1"]},
                                      all_vars={"vnetbench_venv": sys.prefix})
    with topologies.realise(topologies.load(f"inventory:{inventory}")) as up:
        spec = up.launch(2, "none")
        argv = launch.mpirun_argv(spec, [hello], launcher)
        with jobs.Job(new_run_id()) as job:
            import io

            out = io.StringIO()
            outcome = launch.execute(argv, launch.launcher_env(spec, launcher), 90,
                                     passthrough=out, collect_records=False, job=job)
    assert outcome.returncode == 0 and not outcome.timed_out, outcome.tail(20)
    said = sorted(re.findall(r"rank (\d+) of (\d+) on (\S+)", out.getvalue()))
    assert said == [("0", "2", hosts["h0"].hostname), ("1", "2", hosts["h1"].hostname)], out.getvalue()


def _check(hosts, venv: str, *extra) -> tuple[int, list[dict], str]:
    import json

    inventory = hosts.write_inventory(hosts.dir / "inventory-check.yml", {"compute": ["h0", "h1"]},
                                      all_vars={"vnetbench_venv": venv})
    proc = subprocess.run([sys.executable, "-m", "vnetbench", "hosts", "check", "--inventory", str(inventory),
                           "--json", *extra], capture_output=True, text=True, timeout=120)
    return proc.returncode, json.loads(proc.stdout or "[]"), proc.stderr


def allreduce_on_hosts(hosts, mpi: str, name: str) -> dict:
    """One allreduce of 2 ranks on h0 and h1 with ``--mpi mpi``: its record."""
    from vnetbench import engine
    from vnetbench import topologies

    inventory = hosts.write_inventory(hosts.dir / f"inventory-{name}.yml", {"compute": ["h0", "h1"]},
                                      all_vars={"vnetbench_venv": sys.prefix})
    params = {"max_size": 4096, "iterations": 10, "large_iterations": 3}
    with topologies.realise(topologies.load(f"inventory:{inventory}")) as up:
        (record,) = engine.run_kernel("allreduce", params, 2, bind="none", timeout=90, realised=up, mpi=mpi)
    return record


def test_a_kernel_on_two_hosts_loads_the_named_library(flavour, hosts):
    launcher = launcher_of(flavour)
    record = allreduce_on_hosts(hosts, launcher, flavour)
    assert record["status"] == "ok", record["validation"]
    assert [p["hostname"] for p in record["placement"]] == [hosts["h0"].hostname, hosts["h1"].hostname]
    expected = os.path.realpath(LIBRARY_FILE[flavour])
    assert [p["mpi_library"] for p in record["placement"]] == [expected, expected]
    assert record["launch"]["mpi"]["library"]["path"] == expected


def test_each_host_finds_the_library_where_it_has_it(hosts, tmp_path):
    """A site MPI whose lib/ differs between hosts (h1 has the library under MPICH's own name, as a copy):
    each rank finds it on its own host - a path computed on the launcher's host would not exist on h1 - and h1's
    rank links it as libmpi.so.12 itself, starting again with the link on LD_LIBRARY_PATH."""
    launcher_of("mpich")
    prefix = tmp_path / "site"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "lib").mkdir()
    (prefix / "bin" / "mpiexec").write_text('#!/bin/sh\nexec /usr/bin/mpiexec.hydra "$@"\n')
    (prefix / "bin" / "mpiexec").chmod(0o755)
    (prefix / "lib" / "libmpi.so.12").symlink_to(LIBRARY_FILE["mpich"])
    h1_lib = tmp_path / "h1-lib"
    h1_lib.mkdir()
    shutil.copy(os.path.realpath(LIBRARY_FILE["mpich"]), h1_lib / "libmpich.so.12")
    hosts.restart_sshd(hosts["h1"], [(str(h1_lib), str(prefix / "lib"))])
    try:
        record = allreduce_on_hosts(hosts, str(prefix / "bin" / "mpiexec"), "site")
    finally:
        hosts.restart_sshd(hosts["h1"])
        from vnetbench.core.rundir import state_root

        for made in (state_root() / ".cache").glob("mpilib-*"):  # h1's link, kept for later runs, goes with the test
            if os.path.islink(made / "libmpi.so.12") and str(tmp_path) in os.readlink(made / "libmpi.so.12"):
                shutil.rmtree(made)
    assert record["status"] == "ok", record["validation"]
    assert [p["mpi_library"] for p in record["placement"]] == [os.path.realpath(LIBRARY_FILE["mpich"]),
                                                                str(prefix / "lib" / "libmpich.so.12")]
    assert record["environment"]["versions"]["mpi"].startswith("MPICH 4.")


def test_hosts_check_reports_the_site_mpi_of_every_host(hosts, tmp_path):
    launcher_of("mpich")
    venv = sys.prefix
    printed = subprocess.run([LAUNCHERS["mpich"], "--version"], capture_output=True, text=True, timeout=30).stdout
    version = re.search(r"HYDRA build details:\s+Version:\s+(\S+)", printed).group(1)  # this machine's MPICH
    code, reports, err = _check(hosts, venv, "--mpi", "mpich")
    assert code == 0, err
    assert {r["probe"]["mpi"] for r in reports} == {f"MPICH {version} (Hydra, libmpich.so.12)"}, reports

    # A fake, on purpose: h1 sees another Hydra at /usr/bin/mpiexec.hydra (bind-mounted in its own mount
    # namespace only), as a host with an older MPICH installed would
    fake = tmp_path / "mpiexec.hydra"
    fake.write_text("#!/bin/sh\nprintf 'HYDRA build details:\\n    Version:    3.4.1\\n'\n")
    fake.chmod(0o755)
    hosts.restart_sshd(hosts["h1"], [(str(fake), "/usr/bin/mpiexec.hydra")])
    try:
        code, reports, err = _check(hosts, venv, "--mpi", "mpich")
    finally:
        hosts.restart_sshd(hosts["h1"])
    assert code == 1
    problems = {r["name"]: r["problems"] for r in reports}
    assert problems["h0"] == []
    assert problems["h1"] == [f"MPI MPICH 3.4.1 (Hydra, libmpich.so.12) differs from MPICH {version} (Hydra, "
                              "libmpich.so.12) on h0"], problems
