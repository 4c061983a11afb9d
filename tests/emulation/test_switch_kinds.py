"""Every switch kind for real: Linux bridge, Open vSwitch (userspace datapath here, daemons started by vnetbench
or the host's own) and macvlan, under the same MPI kernels, on one switch and across two (the bridge, which every
other netns test runs on, with --switch bridge in tests/emulation/test_md_topologies.py).

Cheap on purpose: each case brings its topology up once and runs short pingpong and halo runs on it. Open vSwitch
tests skip, saying why, where Debian's openvswitch-switch is not installed. The host must be as it was after each
test: interfaces, namespaces, qdiscs, cgroups (the ``kinds_clean`` fixture) and no OVS daemon of vnetbench's left.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import json_lines, requires_mpi, vnetbench
from emulation.conftest import requires_netns, snapshot

pytestmark = [requires_netns, requires_mpi, pytest.mark.timeout(300)]

OVS_TOOLS = ("ovs-vsctl", "ovsdb-server", "ovs-vswitchd", "ovsdb-tool", "ethtool")
requires_ovs = pytest.mark.skipif(not all(shutil.which(t) for t in OVS_TOOLS),
                                  reason="Open vSwitch tests: needs openvswitch-switch and ethtool (apt-get install)")
OWN_OVS = Path("/run/vnetbench/ovs")
SYSTEM_RUN = Path("/var/run/openvswitch")
SHORT_PINGPONG = ["--min-size", "8", "--max-size", "65536", "--iterations", "200", "--large-iterations", "10",
                  "--large-warmup", "1", "--bw-iterations", "4", "--window", "4"]
SHORT_HALO = ["--global", "16,16,16", "--steps", "5"]


def load(ref: str, kind: str):
    from vnetbench import topologies

    return topologies.load(f"switch:{kind}:{ref}")


@pytest.fixture
def kinds_clean():
    """Yields ``use(ref, kind)``; takes down what is still up of them, cleans up, compares the host."""
    from vnetbench.topologies.thishost import state
    from vnetbench.topologies.netns import life

    before, used = snapshot(), []
    yield lambda ref, kind: used.append((ref, kind))
    ids = set()
    for ref, kind in used:
        topology = load(ref, kind)
        ids.add(topology.id)
        if state.read(topology.id) is not None:
            life.down(topology.id)
    life.cleanup()
    after = snapshot()
    # the machine is shared: other runs' jobs and topologies come and go meanwhile; this test's are compared
    before, after = _ours(before, ids), _ours(after, ids)
    assert after == before, "the host changed: " + json.dumps(
        {k: {"gone": sorted(set(map(str, before[k])) - set(map(str, after[k]))),
             "new": sorted(set(map(str, after[k])) - set(map(str, before[k])))}
         for k in before if before[k] != after[k]}, indent=1)
    assert not OWN_OVS.exists() and not _own_daemons(), "vnetbench's own OVS daemons were left running"


def _ours(snap: dict, ids: set[str]) -> dict:
    """``snap`` without what belongs to other topologies (vnb-ID-, vnbID of another ID) and other runs' jobs."""
    import re

    other = re.compile(r"(?:vnb-?|/run/vnetbench/)([0-9a-f]{4})")

    def keep(key, item) -> bool:
        text = str(item)
        if key == "states":  # /run/vnetbench's folders: this test's topologies' and vnetbench's own OVS
            return text.split(":")[0].split("/")[0] in ids | {"ovs"}
        return all(found in ids for found in other.findall(text))

    return {key: [item for item in items if keep(key, item)] if isinstance(items, list) else items
            for key, items in snap.items()}


def _own_daemons() -> list[str]:
    """vnetbench's own OVS daemons of this network namespace (the guest tier's, in the other lane's sandbox, are its
    own: a namespace of their own, their files in its own /run/vnetbench)."""
    found = subprocess.run(["pgrep", "--nslist", "net", "--ns", str(os.getpid()), "-a", "-f", str(OWN_OVS)],
                           capture_output=True, text=True).stdout
    return found.splitlines()


def run(kernel: str, ref: str, kind: str, store, *options, timeout=200, check=0):
    proc = vnetbench("run", kernel, "--topology", ref, "--switch", kind, "--ranks", "2", "--store", store, "--json",
                     *options, timeout=timeout, check=check)
    return json_lines(proc.stdout), proc


# the Linux bridge, every other netns test's switch, is asserted on test_md_topologies.py's runs on these two presets
# (--switch bridge: the preset itself, its switches of kind bridge), which bring them up anyway
@pytest.mark.parametrize("ref", ["2vm-1vswitch", "2vm-2vswitch"])
@pytest.mark.parametrize("kind", [pytest.param("ovs", marks=requires_ovs), "macvlan"])
def test_pingpong_and_halo_run_on_every_switch_kind(kinds_clean, tmp_path, kind, ref):
    kinds_clean(ref, kind)
    twin = f"{ref}-{kind}"
    vnetbench("topology", "up", ref, "--switch", kind, check=0, timeout=120)
    store = tmp_path / "s.jsonl"
    records = run("pingpong", ref, kind, store, *SHORT_PINGPONG)[0] + run("halo", ref, kind, store, *SHORT_HALO)[0]
    assert [r["status"] for r in records] == ["ok", "ok"], [r["validation"] for r in records]
    for record in records:
        assert record["topology"]["name"] == twin
        switches = record["topology"]["switches"]
        assert {sw["kind"] for sw in switches} == {kind} and len(switches) == int(ref[4])
        if kind == "ovs":
            assert {sw["datapath"] for sw in switches} <= {"netdev", "system"}
            assert all(sw["ovs_version"] and sw["daemons_started_by_vnetbench"] is not None for sw in switches)
    vnetbench("topology", "down", ref, "--switch", kind, check=0)


@requires_ovs
def test_ovs_vswitchd_killed_mid_run_fails_naming_the_switch_and_the_daemon(kinds_clean, tmp_path):
    if _system_ovs_runs():
        pytest.skip("the host's own OVS runs: vnetbench uses it, and this test kills only vnetbench's own daemon")
    kinds_clean("2vm-1vswitch", "ovs")
    store = tmp_path / "s.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "vnetbench", "run", "pingpong", "--topology", "2vm-1vswitch",
                             "--switch", "ovs", "--ranks", "2", "--store", str(store), "--min-size", "8",
                             "--max-size", "8", "--iterations", "10000000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pid = _wait_for_job_then_vswitchd(proc)
        os.kill(pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, err[-2000:]
    record = [json.loads(line) for line in store.read_text().splitlines()][-1]
    assert record["status"] != "ok"
    said = err + record["validation"]["detail"]
    assert "switch vswitch" in said and "ovs-vswitchd" in said, said[-2000:]


def _wait_for_job_then_vswitchd(proc, limit: float = 120) -> int:
    """The pid of vnetbench's own ovs-vswitchd, once the run's ranks are running."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        ranks = subprocess.run(["pgrep", "-f", "vnetbench.kernels pingpong"], capture_output=True, text=True)
        pidfile = OWN_OVS / "ovs-vswitchd.pid"
        if ranks.stdout.split() and pidfile.exists():
            time.sleep(1)
            return int(pidfile.read_text())
        time.sleep(0.2)
    raise AssertionError("the run's ranks never started")


@requires_ovs
def test_sigkill_then_cleanup_removes_ovs_bridges_and_stops_vnetbench_s_daemons(kinds_clean):
    if _system_ovs_runs():
        pytest.skip("the host's own OVS runs: vnetbench's own daemons are not started")
    kinds_clean("2vm-2vswitch", "ovs")
    topology = load("2vm-2vswitch", "ovs")
    proc = subprocess.Popen([sys.executable, "-m", "vnetbench", "exec", "--topology", "2vm-2vswitch", "--switch",
                             "ovs", "--ranks", "2", "--", "sleep", "60"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    from vnetbench.topologies.thishost import state

    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not (state.read(topology.id) or {}).get("complete"):
            time.sleep(0.1)
        time.sleep(1)
        proc.kill()  # no handler runs: the topology, its OVS bridges and the daemons stay behind
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (OWN_OVS / "ovs-vswitchd.pid").exists()
    cleaned = vnetbench("topology", "cleanup", check=0).stdout
    assert "removed topology 2vm-2vswitch-ovs" in cleaned
    assert not OWN_OVS.exists() and not _own_daemons()


# ---- the host's own Open vSwitch ------------------------------------------------------------------

def _system_ovs_runs() -> bool:
    return subprocess.run(["ovs-vsctl", "--timeout=3", "list-br"], capture_output=True).returncode == 0


@pytest.fixture
def users_ovs(tmp_path):
    """The host's own OVS, as a user's systemd would run it (its sockets in /var/run/openvswitch, where ovs-vsctl
    looks by default), with a bridge of the user's, br-int; started here (database and logs in a temporary folder)
    unless one runs, and stopped afterwards only if started here."""
    started, made_rundir = [], not SYSTEM_RUN.exists()
    if not _system_ovs_runs():
        env = {**os.environ, "OVS_RUNDIR": str(SYSTEM_RUN), "OVS_LOGDIR": str(tmp_path), "OVS_DBDIR": str(tmp_path)}
        SYSTEM_RUN.mkdir(parents=True, exist_ok=True)
        db = tmp_path / "conf.db"
        subprocess.run(["ovsdb-tool", "create", db, "/usr/share/openvswitch/vswitch.ovsschema"], check=True)
        subprocess.run(["ovsdb-server", db, f"--remote=punix:{SYSTEM_RUN}/db.sock", "--pidfile", "--detach",
                        f"--log-file={tmp_path}/ovsdb-server.log"], env=env, check=True, timeout=60,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append(SYSTEM_RUN / "ovsdb-server.pid")
        subprocess.run(["ovs-vsctl", "--no-wait", "init"], check=True, timeout=60)
        subprocess.run(["ovs-vswitchd", "--pidfile", "--detach", "--disable-system",
                        f"--log-file={tmp_path}/ovs-vswitchd.log"], env=env, check=True, timeout=60,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append(SYSTEM_RUN / "ovs-vswitchd.pid")
    mine = subprocess.run(["ovs-vsctl", "br-exists", "br-int"]).returncode != 0
    if mine:
        subprocess.run(["ovs-vsctl", "add-br", "br-int", "--", "set", "bridge", "br-int", "datapath_type=netdev"],
                       check=True, timeout=60)
    try:
        yield
    finally:
        if mine:
            subprocess.run(["ovs-vsctl", "--if-exists", "del-br", "br-int"], timeout=60)
        for pidfile in reversed(started):
            pid = int(pidfile.read_text())
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
                time.sleep(0.05)
        if made_rundir:
            shutil.rmtree(SYSTEM_RUN, ignore_errors=True)


def _bridges() -> list[str]:
    return subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True, check=True).stdout.split()


@requires_ovs
def test_a_users_own_ovs_and_bridge_survive_runs_failures_and_cleanup(kinds_clean, users_ovs, tmp_path):
    kinds_clean("2vm-1vswitch", "ovs")
    store = tmp_path / "s.jsonl"
    records, _ = run("pingpong", "2vm-1vswitch", "ovs", store, *SHORT_PINGPONG)
    assert records[0]["status"] == "ok", records[0]["validation"]
    assert [sw["daemons_started_by_vnetbench"] for sw in records[0]["topology"]["switches"]] == [False]
    assert not OWN_OVS.exists()  # the host's OVS took vnetbench's bridge; no daemon of its own
    assert _bridges() == ["br-int"]
    # a failed run: killed by its timeout half-way (until then its busy-polling ranks and the ovs-vswitchd forwarding
    # their round trips use every core they can get: --timeout 4 cost the test 4 CPU-s more than 2)
    records, _ = run("pingpong", "2vm-1vswitch", "ovs", store, "--min-size", "8", "--max-size", "8",
                     "--iterations", "10000000", "--timeout", "2", check=1)
    assert records[0]["status"] == "timeout"
    assert _bridges() == ["br-int"]
    vnetbench("topology", "cleanup", check=0)
    assert _bridges() == ["br-int"]
    # a bridge of vnetbench's name that no topology of vnetbench's accounts for: refused, one line, exit 2
    name = f"vnb{load('2vm-1vswitch', 'ovs').id}s0"
    subprocess.run(["ovs-vsctl", "add-br", name, "--", "set", "bridge", name, "datapath_type=netdev"], check=True)
    try:
        proc = run("pingpong", "2vm-1vswitch", "ovs", store, *SHORT_PINGPONG, check=2)[1]
        assert proc.stderr.count("\n") == 1 and name in proc.stderr and "already exists" in proc.stderr
    finally:
        subprocess.run(["ovs-vsctl", "--if-exists", "del-br", name], check=True)
    assert _bridges() == ["br-int"]


def test_a_missing_ovs_vsctl_is_one_line_and_exit_2(kinds_clean, tmp_path):
    kinds_clean("2vm-1vswitch", "ovs")
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("ip", "tc", "nsenter", "unshare", "umount", "hostname"):
        if shutil.which(tool):
            (bare / tool).symlink_to(shutil.which(tool))
    proc = vnetbench("run", "pingpong", "--topology", "2vm-1vswitch", "--switch", "ovs", "--store",
                     tmp_path / "s.jsonl", env={**os.environ, "PATH": str(bare)}, check=2)
    assert proc.stderr.count("\n") == 1 and "ovs-vsctl (openvswitch-switch)" in proc.stderr
    assert not (tmp_path / "s.jsonl").exists()


@requires_ovs
def test_an_ovs_vswitchd_whose_database_ovs_vsctl_cannot_reach_is_one_line_and_exit_2(kinds_clean, tmp_path):
    if _system_ovs_runs() or OWN_OVS.exists():
        pytest.skip("an OVS vnetbench can reach runs already")
    kinds_clean("2vm-1vswitch", "ovs")
    env = {**os.environ, "OVS_RUNDIR": str(tmp_path), "OVS_LOGDIR": str(tmp_path), "OVS_DBDIR": str(tmp_path)}
    db, sock = tmp_path / "conf.db", f"unix:{tmp_path}/db.sock"
    subprocess.run(["ovsdb-tool", "create", db, "/usr/share/openvswitch/vswitch.ovsschema"], check=True)
    pidfiles = []
    try:
        subprocess.run(["ovsdb-server", db, f"--remote=punix:{tmp_path}/db.sock", "--pidfile", "--detach",
                        "--log-file"], env=env, check=True, timeout=60, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        pidfiles.append(tmp_path / "ovsdb-server.pid")
        subprocess.run(["ovs-vsctl", f"--db={sock}", "--no-wait", "init"], check=True, timeout=60)
        subprocess.run(["ovs-vswitchd", sock, "--pidfile", "--detach", "--disable-system", "--log-file"], env=env,
                       check=True, timeout=60, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pidfiles.append(tmp_path / "ovs-vswitchd.pid")
        proc = vnetbench("run", "pingpong", "--topology", "2vm-1vswitch", "--switch", "ovs", "--store",
                         tmp_path / "s.jsonl", check=2)
        assert proc.stderr.count("\n") == 1 and "cannot reach its database" in proc.stderr, proc.stderr
        assert not (tmp_path / "s.jsonl").exists() and not OWN_OVS.exists()
    finally:
        for pidfile in reversed(pidfiles):
            pid = int(pidfile.read_text())
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
                time.sleep(0.05)


@requires_ovs
def test_the_kernel_datapath_on_a_kernel_without_it_is_one_line_and_exit_2(kinds_clean, tmp_path):
    from vnetbench.topologies.switches import ovs

    if ovs.kernel_datapath():
        pytest.skip("this kernel has the openvswitch module: datapath system is available")
    kinds_clean("2vm-1vswitch", "ovs")
    spec = tmp_path / "system.yaml"
    spec.write_text("name: t43-system\nswitches:\n  - {name: sw, kind: ovs, datapath: system}\n"
                    "vms:\n  - {name: a, vcpus: 1, memory: 256M, switch: sw}\n")
    proc = vnetbench("topology", "up", spec, check=2)
    assert proc.stderr.count("\n") == 1 and "datapath system needs the kernel's openvswitch module" in proc.stderr
    assert not OWN_OVS.exists()
