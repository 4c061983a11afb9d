"""The Ansible playbooks, run for real (ansible-playbook, no mock) against sshd hosts in network namespaces.

Three hosts: h0 is the head node, h1 and h2 the compute hosts, on switches sw1 and sw2. The
deploy playbook installs a wheel of this checkout into a fresh venv (its dependencies come
from PyPI or pip's cache); the sweep runs mpirun on h0, which starts the ranks on h1 and h2
over SSH with the keys the ssh playbook made.
"""

import re
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
import yaml

from conftest import vnetbench
from harness.ansible_run import ANSIBLE_DIR, Ansible, vnetbench_wheelhouse
from vnetbench import topologies
from vnetbench.core.store import Store

pytestmark = pytest.mark.timeout(900)

GROUPS = {"head": ["h0"], "compute": ["h1", "h2"], "switch_sw1": ["h1"], "switch_sw2": ["h2"]}
TINY_PINGPONG = ["--max-size", "1024", "--iterations", "50", "--large-iterations", "10", "--bw-iterations", "5",
                 "--validate"]


@pytest.fixture(scope="module")
def cluster(make_hosts, require_ansible):
    hosts = make_hosts(3)
    root = hosts.dir
    started = time.monotonic()
    wheel, wheelhouse = vnetbench_wheelhouse(root / "build")
    timings = {"wheel and wheelhouse": time.monotonic() - started}
    settings = {
        "vnetbench_venv": str(root / "opt" / "vnetbench"),
        "vnetbench_config_dir": str(root / "etc" / "vnetbench"),
        "vnetbench_results_dir": str(root / "var" / "vnetbench"),
        "vnetbench_topology_name": "netns-pair",
        "vnetbench_install_wheel": str(wheel),
        # the hosts have no route to PyPI: they install from a wheelhouse the controller filled,
        # which they read at the same path (one filesystem, as an NFS share would give real hosts)
        "vnetbench_install_wheelhouse": str(wheelhouse),
        # bytecode is compiled on first import instead: halves the install on 2 cores
        "vnetbench_install_pip_args": ["--no-compile"],
        "vnetbench_install_python": getattr(sys, "_base_executable", sys.executable),
        "vnetbench_sweep_kernel": "pingpong",
        "vnetbench_sweep_ranks": [2],
        "vnetbench_sweep_repeat": 1,
        # the "hosts" share this machine's 2 cores: no binding, or both ranks would pin core 0
        "vnetbench_sweep_args": ["--bind", "none", "--timeout", "180"],
        "vnetbench_sweep_kernel_args": TINY_PINGPONG,
        "vnetbench_sweep_timeout": 300,
        "vnetbench_fetch_dest": str(root / "fetched"),
    }
    inventory = hosts.write_inventory(root / "inventory.yml", GROUPS, all_vars=settings)
    return SimpleNamespace(hosts=hosts, inventory=inventory, settings=settings, ansible=Ansible(hosts, inventory),
                           timings=timings)


@pytest.fixture(scope="module")
def site(cluster):
    """site.yml, played once for the tests that read it (its first play is deploy.yml's, run again)."""
    started = time.monotonic()
    played = cluster.ansible.play("site.yml")
    cluster.timings["site"] = time.monotonic() - started
    return played


def played_ok(played, what: str) -> None:
    assert played.returncode == 0, f"{what} failed (exit {played.returncode}):\n{played.tail()}"
    for host, counts in played.recap.items():
        assert counts["failed"] == 0 and counts["unreachable"] == 0, f"{what}: {host}: {counts}\n{played.tail()}"


def test_deploy_installs_one_vnetbench_at_the_same_path_on_every_host(cluster):
    started = time.monotonic()
    played = cluster.ansible.play("deploy.yml", forks=1)
    cluster.timings["deploy"] = time.monotonic() - started
    played_ok(played, "deploy.yml")
    assert set(played.recap) == {"h0", "h1", "h2"}
    assert sum(counts["changed"] for counts in played.recap.values()) > 0
    venv = cluster.settings["vnetbench_venv"]
    versions = set()
    for host in cluster.hosts:
        proc = subprocess.run(cluster.hosts.ssh_argv(host, f"{venv}/bin/vnetbench", "--version"), capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        versions.add(proc.stdout.strip())
    assert len(versions) == 1 and versions.pop().startswith("vnetbench ")


def test_a_second_deploy_changes_nothing(site):
    # site.yml plays deploy.yml first, on hosts deployed already (hosts in parallel now: with nothing to install, they
    # no longer race on the shared venv); the plays after it change things of their own
    played_ok(site, "site.yml")
    (deploy,) = [play["name"] for play in yaml.safe_load((ANSIBLE_DIR / "deploy.yml").read_text())]
    plays = site.changed_by_play()
    assert deploy in plays, f"site.yml did not play {deploy!r} (plays: {sorted(plays)})\n{site.tail()}"
    assert not plays[deploy], f"the second deploy changed something: {plays[deploy]}\n{site.tail()}"


def test_site_sets_up_ssh_writes_the_hostfile_runs_a_sweep_and_fetches_it(cluster, site):
    hosts = cluster.hosts
    played_ok(site, "site.yml")

    # passwordless SSH from host to host, with the key and known_hosts the ssh playbook made
    proc = subprocess.run(hosts.ssh_argv(hosts["h0"], "ssh", "-o", "BatchMode=yes", hosts["h2"].address, "hostname"),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == hosts["h2"].hostname, proc.stderr

    # the files written on the head node say what vnetbench reads from the inventory itself
    config = cluster.settings["vnetbench_config_dir"]
    from_inventory = topologies.load(f"inventory:{cluster.inventory}")
    for written in (topologies.load(f"hostfile:{config}/hostfile"), topologies.load(f"{config}/topology.yml")):
        assert written.name == from_inventory.name == "netns-pair"
        assert [(h.name, h.address, h.switch, h.slots) for h in written.hosts] == \
               [(h.name, h.address, h.switch, h.slots) for h in from_inventory.hosts] == \
               [("h1", hosts["h1"].address, "sw1", 1), ("h2", hosts["h2"].address, "sw2", 1)]
        assert written.subnet == from_inventory.subnet == str(hosts.network)
        assert written.venv == cluster.settings["vnetbench_venv"]

    # the sweep ran on h0, its ranks on h1 and h2, and its store came back to the controller
    (record,) = Store(cluster.hosts.dir / "fetched" / "h0" / "results.jsonl").read()
    assert record["status"] == "ok", record["validation"]
    assert record["topology"]["backend"] == "hosts" and record["topology"]["name"] == "netns-pair"
    placement = record["placement"]
    assert [p["host"] for p in placement] == ["h1", "h2"]
    assert [p["switch"] for p in placement] == ["sw1", "sw2"]
    assert [p["hostname"] for p in placement] == [hosts["h1"].hostname, hosts["h2"].hostname]
    venv = cluster.settings["vnetbench_venv"]
    # the head node's vnetbench is the deployed one; the launcher --mpi auto chose there is started by absolute
    # path, its daemons on every host from the same installation
    command = record["launch"]["command"]
    assert re.search(rf"{re.escape(venv)}/bin/python[0-9.]* -m vnetbench\.kernels ", command), command
    launcher = command.split()[0]
    assert launcher.startswith("/") and f"--prefix {launcher.rsplit('/', 2)[0]} " in command, command
    assert record["launch"]["mca"]["btl_tcp_if_include"] == str(hosts.network)


def test_hosts_check_passes_on_the_deployed_hosts(cluster):
    proc = vnetbench("hosts", "check", "--inventory", cluster.inventory, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verdict: ok: all 3 hosts" in proc.stdout


def test_a_sweep_over_its_time_limit_fails_clearly_and_leaves_nothing_running(cluster):
    played = cluster.ansible.play("sweep.yml", "-e", "vnetbench_sweep_timeout=2",
                                  "-e", json_arg({"vnetbench_sweep_kernel_args": ["--max-size", "1048576",
                                                                                  "--iterations", "100000"]}))
    assert played.returncode != 0
    assert "did not finish within 2 s (vnetbench_sweep_timeout)" in played.output, played.tail()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and left_running(cluster.hosts):
        time.sleep(0.5)
    assert not left_running(cluster.hosts), left_running(cluster.hosts)


@pytest.mark.parametrize("case, hint", [
    ("no address", "host h2: needs an address"),
    ("unknown group", "no group 'workers' with hosts"),
    ("two switches", "host h1: needs an address (ansible_host or vnetbench_address) and at most one switch"),
])
def test_a_bad_inventory_stops_the_configure_playbook_naming_the_host(cluster, case, hint):
    data = yaml.safe_load(cluster.inventory.read_text())
    children = data["all"]["children"]
    if case == "no address":
        for group in children.values():
            if "h2" in group["hosts"]:
                group["hosts"]["h2"] = {k: v for k, v in group["hosts"]["h2"].items() if k != "ansible_host"}
    elif case == "unknown group":
        data["all"]["vars"]["vnetbench_hostfile_group"] = "workers"
    else:
        children["switch_sw2"]["hosts"]["h1"] = children["switch_sw1"]["hosts"]["h1"]
    bad = cluster.hosts.dir / f"bad-{case.replace(' ', '-')}.yml"
    bad.write_text(yaml.safe_dump(data))
    played = Ansible(cluster.hosts, bad).play("configure.yml")
    assert played.returncode != 0
    assert hint in played.output, played.tail()


def test_an_unreachable_host_fails_the_deploy_and_is_named(cluster):
    data = yaml.safe_load(cluster.inventory.read_text())
    h3 = dict(data["all"]["children"]["compute"]["hosts"]["h2"], ansible_host=cluster.hosts.unused_address())
    data["all"]["children"]["compute"]["hosts"]["h3"] = h3
    bad = cluster.hosts.dir / "unreachable.yml"
    bad.write_text(yaml.safe_dump(data))
    played = Ansible(cluster.hosts, bad).play("deploy.yml")
    assert played.returncode != 0, "a deployment that did not reach h3 must not succeed"
    assert played.recap.get("h3", {}).get("unreachable") == 1, played.tail()
    assert "h3" in played.output and "UNREACHABLE" in played.output


def test_report_timings(cluster):
    print("deploy-tier Ansible timings:", {k: f"{v:.1f} s" for k, v in cluster.timings.items()})


def json_arg(value: dict) -> str:
    import json

    return json.dumps(value)


def left_running(hosts) -> list[str]:
    """Processes other than sshd still running on the compute hosts (ranks, prted)."""
    out = []
    for host in (hosts["h1"], hosts["h2"]):
        pids = subprocess.run(["ip", "netns", "pids", host.netns], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if "sshd" not in cmd:
                out.append(f"{host.name}: {cmd[:120]}")
    return out
