"""The netns backend's refusals, the launch agent's checks and the topology commands' exit codes.

Nothing here needs root: system calls are replaced where a refusal must be shown.
"""

import json
import os

import pytest

from conftest import vnetbench
from vnetbench import cli
from vnetbench.core.errors import SpecError, UsageError
from vnetbench.topologies.thishost import fabric, linux, state
from vnetbench.topologies.netns import agent, life
from vnetbench.topologies.thishost.host import HostFacts
from vnetbench.topologies.model.spec import load_file, load_topology

SMALL = HostFacts(cpus_by_node={0: (0, 1)}, memory=24 << 30)


# ---- refusals before anything is created --------------------------------------------------

def test_not_root_is_refused(monkeypatch):
    monkeypatch.setattr(linux.os, "geteuid", lambda: 1000)
    with pytest.raises(UsageError, match="the netns backend needs root"):
        life.preflight(load_topology("2vm-1vswitch", host=SMALL))


def test_missing_tools_are_named(monkeypatch):
    monkeypatch.setattr(linux.os, "geteuid", lambda: 0)
    monkeypatch.setattr(linux.shutil, "which", lambda tool: None if tool in ("ip", "tc") else f"/bin/{tool}")
    with pytest.raises(UsageError, match=r"needs ip \(iproute2\), tc \(iproute2\); install them"):
        life.preflight(load_topology("2vm-1vswitch", host=SMALL))


def test_a_delay_without_netem_is_refused_at_its_line(monkeypatch, tmp_path):
    monkeypatch.setattr(linux, "require_root_and_tools", lambda backend: None)
    monkeypatch.setattr(linux, "has_netem", lambda: False)
    path = tmp_path / "slow.yaml"
    path.write_text("name: slow\nvms:\n  - {name: a, vcpus: 1, memory: 1GB, switch: s}\n"
                    "switches:\n  - name: s\n    uplink:\n      rate: 1gbit\n      delay: 5ms\n")
    with pytest.raises(SpecError) as caught:
        life.preflight(load_file(path, host=SMALL))
    assert str(caught.value) == (f"{path}:8: switches[0].uplink.delay: delay needs tc netem, which this kernel "
                                 f"lacks (sch_netem); remove delay, or run on a kernel with netem")


def test_a_delay_with_netem_is_shaped_by_netem_then_tbf(tmp_path):
    from vnetbench.topologies.netns import plan

    path = tmp_path / "slow.yaml"
    path.write_text("name: slow\nvms:\n  - {name: a, vcpus: 1, memory: 1GB, switch: s}\n"
                    "switches:\n  - name: s\n    uplink: {rate: 100mbit, delay: 5ms}\n")
    topology = load_file(path, host=SMALL)
    import ipaddress

    lines = fabric.shaping(plan.layout(topology, SMALL, ipaddress.IPv4Network("10.9.9.0/24")).fabric)
    assert lines[0].endswith("root handle 1: netem delay 5000us limit 100000")
    assert "parent 1:1 handle 10: tbf rate 100000000bit burst 131072 latency 20ms" in lines[1]
    assert len(lines) == 4  # both ends of the uplink


def test_the_local_backend_has_nothing_to_bring_up():
    code = cli.main(["topology", "up", "native"])
    assert code == 2


# ---- the launch agent ---------------------------------------------------------------------

@pytest.mark.parametrize("argv, host, command", [
    (["vm1", "prted --x 1"], "vm1", "prted --x 1"),
    (["-x", "-o", "BatchMode=yes", "vm1", "prted", "--x", "1"], "vm1", "prted --x 1"),
    (["-T", "root@vm1", "true"], "vm1", "true"),
    (["--", "vm1", "true"], "vm1", "true"),
])
def test_agent_reads_an_ssh_command_line(argv, host, command):
    assert agent.parse(argv) == (host, command)


@pytest.mark.parametrize("argv, phrase", [([], "no host given"), (["-o", "X"], "no host given"),
                                          (["vm1"], "no command given for vm1")])
def test_agent_without_host_or_command(argv, phrase):
    with pytest.raises(ValueError, match=phrase):
        agent.parse(argv)


def fake_state(tmp_path, monkeypatch, complete=True):
    monkeypatch.setattr(state, "RUN_DIR", tmp_path)
    vm = {"name": "vm1", "hostname": "t-vm1", "netns": "vnb-abcd-vm1", "uts": str(tmp_path / "uts"), "cpus": [0]}
    state.write({"id": "abcd", "name": "t", "complete": complete, "layout": {"vms": [vm]}, "cgroups": {}})
    return vm


def test_agent_refuses_hosts_that_are_not_vms(tmp_path, monkeypatch, capsys):
    fake_state(tmp_path, monkeypatch)
    assert agent.main(["somehost.example.org", "rm -rf /"]) == agent.REFUSED
    assert "'somehost.example.org' is not a VM of a vnetbench topology that is up; refused" in capsys.readouterr().err


def test_agent_refuses_vms_of_unfinished_topologies(tmp_path, monkeypatch):
    fake_state(tmp_path, monkeypatch, complete=False)
    assert state.find_vm("t-vm1") is None
    assert agent.main(["t-vm1", "true"]) == agent.REFUSED


def test_agent_enters_the_vm(tmp_path, monkeypatch):
    vm = fake_state(tmp_path, monkeypatch)
    calls = {}
    monkeypatch.setattr(agent, "enter", lambda vm, cgroups: calls.setdefault("enter", vm["name"]))
    # what this fake state names does not exist; the checks of real namespaces are in tests/faults
    monkeypatch.setattr(agent, "check", lambda st, vm: None)
    monkeypatch.setattr(agent.shutil, "which", lambda tool: "/usr/bin/nsenter")
    monkeypatch.setattr(agent.os, "execv", lambda path, argv: calls.setdefault("exec", argv))
    agent.main(["-x", "t-vm1", "PRTE_PREFIX=/v;export PRTE_PREFIX;/v/bin/prted", "--daemonize"])
    assert calls["enter"] == "vm1"
    assert calls["exec"] == ["/usr/bin/nsenter", "--net=/run/netns/vnb-abcd-vm1", f"--uts={vm['uts']}", "/bin/sh",
                             "-c", "PRTE_PREFIX=/v;export PRTE_PREFIX;/v/bin/prted --daemonize"]


def test_agent_refuses_vms_of_another_backend(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(state, "RUN_DIR", tmp_path)
    vm = {"name": "vm1", "hostname": "t-vm1", "netns": "vnb-abcd-vm1", "uts": str(tmp_path / "uts"), "cpus": [0]}
    state.write({"id": "abcd", "name": "t", "backend": "qemu", "complete": True, "layout": {"vms": [vm]},
                 "cgroups": {}})
    assert agent.main(["t-vm1", "true"]) == agent.REFUSED
    assert "its topology is the 'qemu' backend's, whose VMs this agent does not enter" in capsys.readouterr().err


def test_each_backend_sees_only_its_own_states(tmp_path, monkeypatch):
    """Backends of VMs on this host share /run/vnetbench: netns lists and takes down its own topologies
    (and those from before states named a backend), never another backend's."""
    import ipaddress

    from vnetbench import topologies
    from vnetbench.topologies.netns import plan

    monkeypatch.setattr(state, "RUN_DIR", tmp_path)
    for name, net, backend in (("2vm-1vswitch", "10.9.9.0/24", None), ("2vm-2vswitch", "10.9.8.0/24", "qemu")):
        topology = load_topology(name, host=SMALL)
        lay = plan.layout(topology, SMALL, ipaddress.IPv4Network(net))
        state.write({"version": state.VERSION, "id": topology.id, "name": name, "source": f"preset {name}",
                     "spec_hash": topology.spec_hash(), "spec": topology.to_dict(), "layout": lay.to_dict(),
                     "cgroups": {}, "created": 0.0, "complete": True, "owner": None,
                     **({"backend": backend} if backend else {})})
    rows = topologies.backend("netns").status()
    assert [(row["name"], row["backend"]) for row in rows] == [("2vm-1vswitch", "netns")]
    assert rows[0]["state"].startswith("damaged: ")  # nothing of it exists on this host
    assert life.take_down("2vm-2vswitch") is None and life.down(load_topology("2vm-2vswitch", host=SMALL).id) is None
    assert state.read(load_topology("2vm-2vswitch", host=SMALL).id) is not None


def test_stale_and_live_owners(tmp_path, monkeypatch):
    assert state.alive(state.me())
    assert not state.alive({"pid": os.getpid(), "start": -1})  # a reused pid is not the owner
    assert not state.alive(None)
    assert state.stale({"owner": {"pid": 2**22 + 7, "start": 1}, "complete": True})
    assert state.stale({"owner": None, "complete": False})
    assert not state.stale({"owner": None, "complete": True})


# ---- the commands -------------------------------------------------------------------------

def test_topology_list_names_the_presets():
    proc = vnetbench("topology", "list", "--json", check=0)
    names = [row["name"] for row in json.loads(proc.stdout)]
    assert names == ["native", "1vm", "2vm-1vswitch", "2vm-2vswitch", "4vm-1vswitch", "4vm-4vswitch"]


def test_topology_show_prints_the_sizes_used():
    proc = vnetbench("topology", "show", "4vm-4vswitch", check=0)
    assert "sizes scaled from a 16-cpu, 48.0 GiB host" in proc.stdout
    assert "4vm-4vswitch-vm4" in proc.stdout and "1gbit (tc tbf, both ways)" in proc.stdout
    shown = json.loads(vnetbench("topology", "show", "4vm-4vswitch", "--json", check=0).stdout)
    assert shown["scaled"]["vms"]["vm1"] == [4, 6 << 30]
    assert len(shown["plan"]["vms"]) == 4


def test_topology_show_spec_is_a_loadable_file(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(vnetbench("topology", "show", "2vm-2vswitch", "--spec", check=0).stdout)
    assert "2vm-2vswitch" in vnetbench("topology", "show", str(path), check=0).stdout


def test_a_broken_file_exits_2_naming_file_line_and_field(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\nvms:\n  - name: vm1\n    vcpus: 1\n    memroy: 1GB\n    switch: s\n"
                    "switches: [{name: s}]\n")
    for action in ("show", "up", "down"):
        proc = vnetbench("topology", action, path, check=2)
        assert f"vnetbench: error: {path}:5: vms[0].memroy: unknown field (did you mean 'memory'?)" in proc.stderr
    proc = vnetbench("run", "pingpong", "--topology", path, "--ranks", "2", "--store", tmp_path / "s.jsonl", check=2)
    assert f"{path}:5: vms[0].memroy" in proc.stderr
    proc = vnetbench("exec", "--topology", path, "--ranks", "2", "--", "true", check=2)
    assert f"{path}:5: vms[0].memroy" in proc.stderr


def test_exec_needs_a_program():
    proc = vnetbench("exec", "--topology", "native", "--ranks", "2", check=2)
    assert "PROGRAM: missing; give it after '--'" in proc.stderr


def test_exec_passes_output_through_on_native():
    proc = vnetbench("exec", "--topology", "native", "--ranks", "2", "--", "echo", "hello from a rank", check=0)
    assert proc.stdout.count("hello from a rank") == 2


def test_exec_reports_a_failing_program():
    proc = vnetbench("exec", "--topology", "native", "--ranks", "1", "--", "false", check=1)
    assert "vnetbench: error: false exited with status" in proc.stderr


def test_topology_status_with_nothing_up(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(state, "RUN_DIR", tmp_path / "none")
    assert cli.main(["topology", "status"]) == 0
    assert "no vnetbench topology is up" in capsys.readouterr().out


def test_taking_down_what_a_live_run_owns_is_refused(tmp_path, monkeypatch, capsys):
    from vnetbench.topologies.netns import plan

    monkeypatch.setattr(state, "RUN_DIR", tmp_path / "run")
    topology = load_topology("2vm-1vswitch", host=SMALL)
    import ipaddress

    lay = plan.layout(topology, SMALL, ipaddress.IPv4Network("10.9.9.0/24"))
    state.write({"version": state.VERSION, "id": topology.id, "name": topology.name, "source": "preset",
                 "spec_hash": topology.spec_hash(), "spec": topology.to_dict(), "layout": lay.to_dict(),
                 "cgroups": {}, "created": 0.0, "complete": True, "owner": state.me()})
    with pytest.raises(UsageError, match=rf"topology '2vm-1vswitch' belongs to a run in progress \(process "
                                         rf"{os.getpid()}\), which takes it down when it ends"):
        life.take_down("2vm-1vswitch")
    assert state.read(topology.id) is not None  # nothing was touched
    assert cli.main(["topology", "down", "4vm-4vswitch"]) == 0
    assert "4vm-4vswitch is not up; nothing to do" in capsys.readouterr().out
    assert cli.main(["topology", "down", "native"]) == 2
    assert "'native' is this host itself; there is nothing to take down" in capsys.readouterr().err


@pytest.mark.parametrize("ref", ["native", "1vm", "2vm-1vswitch", "2vm-2vswitch", "4vm-1vswitch", "4vm-4vswitch",
                                 "ansible/inventory/example.yml"])
def test_topology_show_describes_every_backend_through_its_own_show(ref):
    from vnetbench import topologies

    done = vnetbench("topology", "show", ref)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    topology = topologies.load(ref)
    assert lines[0].startswith(f"{topology.name} (") and f"backend {topology.backend}" in lines[1]
    for vm in getattr(topology, "vms", None) or getattr(topology, "hosts", None) or ():
        assert any(line.split()[:1] == [vm.name] for line in lines), (vm.name, done.stdout)
    shown = json.loads(vnetbench("topology", "show", ref, "--json").stdout)
    assert shown["spec"]["name"] == topology.name and shown["source"] == topology.source
    assert ("plan" in shown) == (topology.backend == "netns")


def test_cleanup_keeps_what_live_runs_hold_unless_forced(tmp_path, monkeypatch):
    """``topology cleanup`` (with or without --all) never takes down a topology that a live run holds - as its
    owner, or attached to one that ``topology up`` left up; --force does, naming the run it ends. The flow is
    lifecycle's; the backend's part is a stand-in that records its teardowns (a real one here would also sweep
    the host's vnetbench objects that this test's private state folder does not know, other users' included)."""
    import subprocess
    import sys

    from vnetbench.topologies.thishost import lifecycle

    monkeypatch.setattr(state, "RUN_DIR", tmp_path / "run")
    import shutil
    import time

    torn = []

    def teardown(st):  # what every backend's teardown ends with: the state folder goes
        torn.append(st["name"])
        shutil.rmtree(state.directory(st["id"]))

    kind = lifecycle.Kind(backend="toy", require=lambda: None, preflight=lambda t: None, layout=None, create=None,
                          teardown=teardown, missing=lambda st: [], orphans=lambda ids: [])
    # two live "runs": real processes, told apart from a reused pid by their start time as any owner is
    runs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(2)]
    try:
        owner, attached = ({"pid": p.pid, "start": state.start_time(p.pid)} for p in runs)
        for tid, name, who in (("aaa1", "owned", owner), ("aaa2", "shared", None), ("aaa3", "idle", None),
                               ("aaa4", "left", {"pid": 2**22 + 7, "start": 1})):
            state.write({"id": tid, "name": name, "backend": "toy", "source": "preset", "layout": {},
                         "created": time.time(), "complete": True, "owner": who})
        # the second run attached to 'shared' (as lifecycle.bring_up does for a run), with its own identity
        (state.directory("aaa2") / "held").mkdir()
        (state.directory("aaa2") / "held" / str(attached["pid"])).write_text(json.dumps(attached))

        rows = {row["name"]: row for row in lifecycle.status(kind, lambda st: {"id": st["id"]})}
        assert rows["owned"]["state"] == f"held by run {owner['pid']}"
        assert rows["shared"]["state"] == f"up (topology up), held by run {attached['pid']}"
        assert rows["idle"]["state"] == "up (topology up)"

        left = f"topology left (aaa4), {lifecycle.stale_reason(state.read('aaa4'))}"
        assert left.endswith("which is gone") and lifecycle.cleanup(kind) == [left]
        assert lifecycle.cleanup(kind, everything=True) == ["topology idle (aaa3), up (topology up)"]
        assert torn == ["left", "idle"]
        assert sorted(lifecycle.cleanup(kind, everything=True, force=True)) == [
            f"topology owned (aaa1), held by run {owner['pid']}, which this ends",
            f"topology shared (aaa2), held by run {attached['pid']}, which this ends"]
        # a holder that is gone holds nothing
        runs[1].kill()
        runs[1].wait()
        assert state.holders({"id": "aaa2", "owner": None}) == []
    finally:
        for proc in runs:
            proc.kill()
            proc.wait()
