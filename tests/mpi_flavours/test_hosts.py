"""The hosts backend with each MPI: the C hello over SSH on two real sshd hosts, one world of two ranks, one
rank on each host (hostfile and SSH options in each flavour's own syntax)."""

import re
import subprocess
import sys

import pytest

from harness.sshd_hosts import SshdHosts, missing_requirements

pytestmark = [pytest.mark.deploy, pytest.mark.timeout(180)]

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
    from vnetbench import flavours, jobs, launch, mpiselect
    from vnetbench.records import new_run_id
    from vnetbench.topologies.hosts import HostsRealised
    from vnetbench.topologies.inventory import load_hosts

    hello = hello_of(flavour)
    launcher = mpiselect.find("openmpi") if flavour == "openmpi5" else flavours.detect(LAUNCHERS[flavour])
    assert launcher.name == flavour
    inventory = hosts.write_inventory(hosts.dir / f"inventory-{flavour}.yml", {"compute": ["h0", "h1"]},
                                      all_vars={"vnetbench_venv": sys.prefix})
    with HostsRealised(load_hosts(inventory=inventory)) as up:
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


def test_hosts_check_reports_the_site_mpi_of_every_host(python_of, hosts, tmp_path):
    venv = str(__import__("pathlib").Path(python_of("mpich")).parent.parent)
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
