"""The hosts backend and ``vnetbench hosts``, against real sshd hosts in network namespaces.

Three hosts with passwordless SSH among them (as the ssh playbook leaves them); vnetbench is
this test run's own venv, which every host sees at the same path (one filesystem).
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import vnetbench
from conftest import json_lines, vnetbench as run_cli
from vnetbench import engine
from vnetbench import topologies
from vnetbench.core.hostfacts import environment_path
from vnetbench.core.store import Store

pytestmark = pytest.mark.timeout(300)

GROUPS = {"head": ["h0"], "compute": ["h1", "h2"], "switch_sw1": ["h1"], "switch_sw2": ["h2"]}
TINY_PINGPONG = {"max_size": 1024, "iterations": 50, "large_iterations": 10, "bw_iterations": 5, "validate": True}


@pytest.fixture(scope="module")
def hosts(make_hosts):
    return make_hosts(3, mesh=True)


@pytest.fixture(scope="module")
def inventory(hosts):
    return hosts.write_inventory(hosts.dir / "inventory.yml", GROUPS, all_vars={"vnetbench_venv": sys.prefix})


def check(*args, timeout=120):
    proc = run_cli("hosts", "check", *map(str, args), timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


def test_check_passes_when_every_host_matches(inventory):
    code, out = check("--inventory", inventory)
    assert code == 0, out
    assert "verdict: ok: all 3 hosts can run vnetbench together" in out
    for name in ("h0", "h1", "h2"):
        row = next(line for line in out.splitlines() if line.startswith(f"{name} "))
        assert row.split()[2] == "ok" and row.split()[-1] == "ok", row
        assert vnetbench.__version__ in row and "2/2" in row  # SSH to both other hosts
        assert "GiB" in row  # free memory reported


def test_check_fails_clearly_when_a_host_sshd_is_stopped(hosts, inventory):
    hosts.stop_sshd(hosts["h2"])
    try:
        code, out = check("--inventory", inventory)
    finally:
        hosts.start_sshd(hosts["h2"])
    assert code == 1, out
    assert "h2: SSH: connection refused (no sshd listening)" in out
    assert "verdict: FAIL: 1 of 3 hosts failed: h2" in out  # not h0 and h1, which cannot reach h2 either


def test_check_fails_when_a_host_has_another_vnetbench(hosts, inventory, tmp_path):
    # A fake, on purpose: h1 sees a different vnetbench/__init__.py at the same path, bind-mounted
    # in h1's own mount namespace only, as a host with another release installed would.
    real = Path(vnetbench.__file__)
    fake = tmp_path / "__init__.py"
    fake.write_text(real.read_text().replace(f'__version__ = "{vnetbench.__version__}"', '__version__ = "0.0.0+fake"'))
    assert "0.0.0+fake" in fake.read_text()
    hosts.restart_sshd(hosts["h1"], [(str(fake), str(real))])
    try:
        code, out = check("--inventory", inventory)
    finally:
        hosts.restart_sshd(hosts["h1"])
    assert code == 1, out
    assert f"h1: vnetbench 0.0.0+fake differs from {vnetbench.__version__} on h0, h2" in out
    assert "verdict: FAIL: 1 of 3 hosts failed: h1" in out


def test_check_names_an_unreachable_host(hosts, tmp_path):
    inventory = hosts.write_inventory(tmp_path / "inventory.yml", {"compute": ["h0", "h9"]},
                                      host_vars={"h9": {**hosts.host_vars(hosts["h0"]),
                                                        "ansible_host": hosts.unused_address()}},
                                      all_vars={"vnetbench_venv": sys.prefix})
    started = time.monotonic()
    code, out = check("--inventory", inventory, "--timeout", "3")
    assert code == 1, out
    assert "h9: SSH: no answer in 3 s" in out and "verdict: FAIL: 1 of 2 hosts failed: h9" in out
    assert time.monotonic() - started < 60


@pytest.mark.parametrize("case, phrase", [
    ("no address", "host 'h9': no address: it has no ansible_host, and its name does not resolve"),
    ("unknown group", "no group 'workers'; groups: all, compute, head, switch_sw1, switch_sw2"),
])
def test_a_bad_inventory_is_refused_before_anything_starts(hosts, tmp_path, case, phrase):
    groups = dict(GROUPS)
    extra = ["--group", "workers"] if case == "unknown group" else []
    if case == "no address":
        groups["compute"] = ["h1", "h9"]
    inventory = hosts.write_inventory(tmp_path / "inventory.yml", groups, host_vars={"h9": {"vnetbench_slots": 2}})
    code, out = check("--inventory", inventory, *extra)
    assert code == 2, out
    assert phrase in out


def test_a_hostfile_without_keys_for_this_machine_fails_per_host(hosts, tmp_path):
    # a hostfile carries no SSH settings: this machine's own keys and known_hosts are used (as
    # mpirun would use them), and the test machine has none for these hosts
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("".join(f"{h.address} slots=1  # vnetbench: name={h.name}\n" for h in hosts))
    code, out = check("--hostfile", hostfile, "--timeout", "5")
    assert code == 1, out
    assert all(f"{h.name}: SSH: " in out for h in hosts)


def test_facts_go_into_the_store_environment_record(inventory, tmp_path):
    store = tmp_path / "results.jsonl"
    proc = run_cli("hosts", "facts", "--inventory", inventory, "--store", store, "--json",
                   timeout=120)
    assert proc.returncode == 0, proc.stderr
    record = json.loads(environment_path(store).read_text())
    assert record["kind"] == "environment" and set(record["hosts"]) == {"h0", "h1", "h2"}
    facts = record["hosts"]["h1"]
    assert facts["cpu_model"] and facts["logical_cpus"] >= 1 and facts["numa"]
    assert set(facts["nics"]) == {"lo", "eth0"}  # what h1's own namespace has
    assert facts["hostname"].endswith("-h1")


def test_a_kernel_runs_over_ssh_on_two_hosts(hosts, inventory, tmp_path):
    topology = topologies.load(f"inventory:{inventory}")
    store = tmp_path / "results.jsonl"
    with topologies.realise(topology) as up:
        (record,) = engine.run_kernel("pingpong", TINY_PINGPONG, 2, store=store, bind="none", realised=up)
        hostfiles = Path(up._dir)
        assert len(list(hostfiles.iterdir())) == 1
    assert not hostfiles.exists()  # the temporary hostfile went with the realised topology
    assert record["status"] == "ok", record["validation"]
    assert [(p["host"], p["switch"], p["hostname"]) for p in record["placement"]] == [
        ("h1", "sw1", hosts["h1"].hostname), ("h2", "sw2", hosts["h2"].hostname)]
    assert [p["address"] for p in record["placement"]] == [hosts["h1"].address, hosts["h2"].address]
    assert record["placement"][0]["netns"] != record["placement"][1]["netns"]
    assert record["topology"]["backend"] == "hosts"
    command = record["launch"]["command"]
    # the launcher --mpi auto chose, by absolute path, its daemons on every host from the same installation
    launcher = Path(command.split()[0])
    assert launcher.is_absolute() and f"--prefix {launcher.parent.parent} " in command, command
    assert record["launch"]["mca"]["btl_tcp_if_include"] == str(hosts.network)
    assert record["launch"]["mca"]["prte:prte_if_include"] == str(hosts.network)

    # results of remote runs, gathered with Fabric: the same file on every host, stored once
    fetched = tmp_path / "fetched.jsonl"
    proc = run_cli("hosts", "fetch", str(store), "--inventory", inventory, "--store", fetched, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert [r["run_id"] for r in Store(fetched).read()] == [record["run_id"]]
    assert "1 new" in proc.stdout and "already stored" in proc.stdout


@pytest.mark.parametrize("given", ["path", "option"])
def test_the_cli_runs_a_kernel_on_an_inventory(inventory, tmp_path, given):
    # the inventory as a bare path (the hosts backend claims it) and as --inventory (the ref inventory:PATH)
    where = ["--topology", inventory] if given == "path" else ["--inventory", inventory]
    store = tmp_path / "results.jsonl"
    proc = run_cli("run", "pingpong", *where, "--ranks", "2", "--bind", "none", "--json",
                   "--store", store, "--max-size", "1024", "--iterations", "50", "--validate", timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (record,) = json_lines(proc.stdout)
    assert [p["host"] for p in record["placement"]] == ["h1", "h2"]


def test_a_run_on_a_host_that_stopped_answering_fails_naming_it(hosts, inventory):
    hosts.stop_sshd(hosts["h2"])
    try:
        with pytest.raises(Exception, match=r"hosts not reachable over SSH: h2 \(.*Connection refused\)"):
            topologies.realise(topologies.load(f"inventory:{inventory}"))
    finally:
        hosts.start_sshd(hosts["h2"])


def test_a_run_that_times_out_is_recorded_and_its_ranks_end_on_every_host(hosts, inventory):
    endless = {**TINY_PINGPONG, "max_size": 1 << 20, "iterations": 1_000_000}
    with topologies.realise(topologies.load(f"inventory:{inventory}")) as up:
        (record,) = engine.run_kernel("pingpong", endless, 2, bind="none", timeout=4, realised=up)
    assert record["status"] == "timeout", record
    test_nothing_is_left_running_on_the_hosts(hosts)


def test_nothing_is_left_running_on_the_hosts(hosts):
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        left = [line for h in hosts for line in _processes(h) if "sshd" not in line]
        if not left:
            return
        time.sleep(0.5)
    assert not left, left


def _processes(host) -> list[str]:
    pids = subprocess.run(["ip", "netns", "pids", host.netns], capture_output=True, text=True).stdout.split()
    out = []
    for pid in pids:
        try:
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            pass
    return out
