"""The qemu backend for real: QEMU guests (TCG here: KVM hangs on these machines, DESIGN.md) on real switches of
every kind (one switch of macvlan, the guests' NICs macvtaps; two switches, a Linux bridge and an Open vSwitch),
with every MPI flavour launching into them through the real CLI.

Guests are slow to boot under TCG and each run's Python imports take seconds there (tens of seconds a run), so
the tier boots two topologies once (``guests``: 2vm-1vswitch and 2vm-2vswitch shapes, 1-vCPU guests of 512 MB)
and shares them, and spends its runs where each proves something of its own: every flavour launches into guests
across two switches, the path through the physical switch (Open MPI 5's as the run a guest is killed under: its
allreduce is seen exchanging - a megabyte to vm2 - and then fails naming the VM, but its record is no passing
one; Open MPI 5 and 4 also on one switch), a kernel compiled with numba (pingpong's loop) and one in numpy alone
(allreduce) run in guests, two ranks share a guest, the 2-switch path's bandwidth is held against its uplink's
rate (and the 1-switch path's against it, so that the check can fail), and the host must be as it was found
when both are down. Refusals and faults at bring-up use guests that never finish booting. Timings under TCG
mean nothing: the tier checks behaviour, records and shaping.

What a run costs here: a rank that loads numba (pingpong's loop) spends about 11 s of its guest's CPU importing
it and readying its compiler under TCG, even with the loops in numba's cache, against about 5 s for numpy and
mpi4py alone; so pingpong runs where its bandwidth is what is checked (on each switch shape, at 1 MiB alone),
and the runs whose point is a flavour or a fault run allreduce.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harness import hoststate
from tests.harness.launchers import LAUNCHERS_OF

pytestmark = pytest.mark.timeout(600)

HERE = Path(__file__).resolve().parent
ONE, TWO = HERE / "qemu-one-switch.yaml", HERE / "qemu-two-switches.yaml"
RATE_MBPS = 50e6 / 8 / 1e6  # qemu-two-switches.yaml's uplinks, in pingpong's MB/s
BIN = Path(sys.executable).parent
FLAVOURS = LAUNCHERS_OF
PINGPONG = ["--min-size", "1048576", "--max-size", "1048576", "--iterations", "10", "--warmup", "1",
            "--large-iterations", "3", "--large-warmup", "1", "--window", "8", "--bw-iterations", "5"]
HALO = ["--global", "12,12,12", "--steps", "3"]  # for runs that never start: the guests do not come up
# a few sizes and rounds: the point is where the ranks run and what they load, and each round under TCG, both
# guests' ranks busy-polling, costs host CPU (ten sizes of 22 rounds took 1.3 to 2 s of a run)
ALLREDUCE = ["--max-size", "64", "--iterations", "10", "--warmup", "1"]
RUN_TIMEOUT = 240


def why_not() -> str | None:
    if os.geteuid() != 0:
        return "needs root (taps, bridges)"
    from vnetbench.core.errors import UsageError
    from vnetbench.topologies.qemu import machine

    try:
        machine.require()
        machine.kernel(None)
    except UsageError as exc:
        return str(exc)
    return None


def cli(*args, timeout: float = RUN_TIMEOUT, check: bool = False, env=None) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "vnetbench", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, env=env)
    if check:
        assert done.returncode == 0, f"vnetbench {' '.join(map(str, args))} exited {done.returncode}:\n{done.stderr}"
    return done


def state_of(path: Path) -> dict:
    from vnetbench.topologies import load
    from vnetbench.topologies.thishost import state

    return state.read(load(str(path)).id)


def ours(topology_id: str) -> dict:
    """What of this topology exists on the host: interfaces with its id, its guests' processes, its state."""
    from vnetbench.topologies.thishost import state
    from vnetbench.topologies.qemu import guests

    links = sorted(name for _, name in socket.if_nameindex() if name.startswith(f"vnb{topology_id}"))
    return {"links": links, "processes": sorted(guests.processes({topology_id})),
            "state": state.directory(topology_id).exists()}


NOTHING = {"links": [], "processes": [], "state": False}


def qemus(topology_id: str) -> list[int]:
    """The QEMU processes of this topology's guests."""
    from vnetbench.topologies.thishost import linux

    return [pid for pid in ours(topology_id)["processes"] if (linux.command_name(pid) or "").startswith("qemu-system")]


# interfaces are read in this network namespace (ip, /proc/net), never through sysfs: tests/harness/lanes.py
# runs this tier in a namespace of its own, where /sys still shows the host's
def sent_to(link: str) -> int:
    """Bytes the host sent out of ``link`` (/proc/net/dev, this namespace's)."""
    for line in Path("/proc/net/dev").read_text().splitlines()[2:]:
        name, _, counters = line.partition(":")
        if name.strip() == link:
            return int(counters.split()[8])
    raise AssertionError(f"{link} is gone")


@pytest.fixture(scope="module")
def guests(tmp_path_factory):
    """Both topologies up (``topology up``), the host as found before, a store for the tier's runs."""
    reason = why_not()
    if reason:
        pytest.skip(f"qemu guest tier: {reason}")
    before = hoststate.everything()
    store = tmp_path_factory.mktemp("qemu") / "results.jsonl"
    began = time.monotonic()
    try:
        for path in (ONE, TWO):
            up = cli("topology", "up", path, timeout=400)
            if up.returncode != 0:
                pytest.fail(f"topology up {path.name} exited {up.returncode}:\n{up.stdout}\n{up.stderr}")
        print(f"\nqemu tier: both topologies up in {time.monotonic() - began:.0f} s")
        yield {"before": before, "store": store, "records": {}}
    finally:
        for path in (ONE, TWO):
            cli("topology", "down", path, timeout=120)


def run(guests, topology: Path, kernel: str, flavour: str, params: list[str], ranks: int = 2) -> dict:
    launcher = FLAVOURS[flavour]
    if not os.access(launcher, os.X_OK):
        pytest.skip(f"{flavour}: {launcher} is not installed")
    began = time.monotonic()
    done = cli("run", kernel, "--topology", topology, "--ranks", ranks, "--mpi", launcher, "--json",
               "--store", guests["store"], *params)
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    said = f"{records[0]['status']}: {records[0]['validation']['detail']}" if records else "no record"
    assert done.returncode == 0 and len(records) == 1 and records[0]["status"] == "ok", \
        f"{kernel} with {flavour} on {topology.name}: {said}\n{done.stderr[-3000:]}"
    record = records[0]
    print(f"\n{kernel} with {flavour} on {topology.name}: {time.monotonic() - began:.0f} s")
    guests["records"][(topology.name, kernel, flavour)] = record
    return record


def in_guests(record: dict, topology: Path) -> None:
    """Each rank ran in its own guest, saw a hypervisor's CPU and the guest's kernel, on the plan's NIC."""
    st = state_of(topology)
    guest = st["guest"]
    assert record["launch"]["mpi"]["flavour"] and record["launch"]["notes"]["accel"] == "tcg"
    said = record["topology"]["guest"]
    assert {key: said[key] for key in ("engine", "accel", "machine", "qemu", "kernel", "kernel_image", "vhost_asked",
                                       "rootfs", "memory_backing")} == {
        "engine": "qemu", "accel": "tcg", "machine": "q35", "qemu": guest["qemu"], "kernel": guest["kernel"]["version"],
        "kernel_image": guest["kernel"]["image"], "vhost_asked": guest["vhost"], "rootfs": guest["rootfs"],
        "memory_backing": guest["memory_backing"]}
    # what the guests use, read from them: no /dev/vhost-net here, so userspace virtio, not asked for
    assert said["vhost"] == ("vhost-net" if guest["vhost"] else "userspace virtio (vhost not asked for)")
    assert all(vm["engine"] == "qemu" and vm["accel"] == "tcg" for vm in record["topology"]["vms"])
    planned = {vm["name"]: vm for vm in st["layout"]["vms"]}
    half = record["ranks"] // 2
    assert [p["vm"] for p in record["placement"]] == ["vm1"] * half + ["vm2"] * half
    for place in record["placement"]:
        vm, seen = planned[place["vm"]], st["guests"][place["vm"]]
        assert place["hostname"] == vm["hostname"], "the rank's own hostname is its guest's"
        assert place["hypervisor"] is True, "the guest's CPU carries the hypervisor flag"
        assert place["kernel"] == guest["kernel"]["version"] == seen["kernel"]
        assert place["addresses"] == {seen["nic"]: vm["address"]}, "one NIC, found by its MAC, with the plan's address"
        assert place["nic"] == seen["nic"] and place["mac"] == vm["mac"]
        assert place["cpus"] == [0], "bound to the guest's one vCPU"


# ---- bad input: one line, exit 2, nothing started ------------------------------------------------

def test_refusals_start_nothing(tmp_path):
    reason = why_not()
    if reason:
        pytest.skip(f"qemu guest tier: {reason}")
    before = hoststate.network()
    # a PATH with every tool the backend needs but QEMU
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("ip", "tc", "busybox", "ssh", "ssh-keygen", "unshare", "numactl"):
        if shutil.which(tool):
            (tools / tool).symlink_to(shutil.which(tool))
    no_qemu = {**os.environ, "PATH": f"{BIN}:{tools}"}
    huge = tmp_path / "huge.yaml"
    huge.write_text(ONE.read_text().replace("memory: 512MB", "memory: 20GB"))
    kvm = tmp_path / "kvm.yaml"  # guest.accel: kvm asked by the file: the refusal names the file and field
    kvm.write_text(ONE.read_text().replace("accel: tcg", "accel: kvm"))
    accel_line = ONE.read_text().splitlines().index("  accel: tcg") + 1
    cases = [
        (["topology", "up", kvm], None, f"{kvm}:{accel_line}: guest.accel kvm: KVM cannot run the guests here"),
        (["run", "halo", "--topology", "2vm-1vswitch", "--vms", "qemu", "--accel", "tcg"], no_qemu,
         "--vms qemu: this host lacks qemu-system-x86_64"),
        (["run", "halo", "--topology", "2vm-1vswitch", "--vms", "qemu", "--accel", "warp"], None,
         "argument --accel: invalid choice: 'warp'"),
        (["exec", "--topology", "1vm", "--ranks", "1", "--vms", "qemu", "--guest-kernel", "/boot/none", "--", "true"],
         None, "--guest-kernel: /boot/none: no such file"),
        (["topology", "up", huge], None, "the guests' memory adds up to 40.0 GiB, above this host's"),
        (["sweep", "--kernel", "halo", "--topologies", "2vm-1vswitch", "--ranks", "2", "--vms", "qemu"], None,
         "KVM cannot run the guests here"),
    ]
    for args, env, expected in cases:
        if "KVM cannot" in expected and not os.path.exists("/dev/kvm"):
            expected = expected.replace("KVM cannot run the guests here", "KVM cannot run the guests here: no /dev/kvm")
        done = cli(*args, env=env, timeout=120)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and expected in lines[0], f"{args}: {done.stderr}"
    assert hoststate.network() == before


# ---- runs on both topologies, every flavour --------------------------------------------------------

def test_the_guests_are_up_as_planned(guests):
    for path in (ONE, TWO):
        st = state_of(path)
        assert st["complete"] and st["guest"]["accel"] == "tcg"
        for vm in st["layout"]["vms"]:
            seen = st["guests"][vm["name"]]
            on_its_switch(vm, st)
            threads = seen["vcpus"]
            assert len(threads) == vm["vcpus"] == 1
            for pinned in threads.values():
                assert os.sched_getaffinity(pinned["thread"]) == {pinned["cpu"]} and pinned["cpu"] in vm["cpus"]
            placed_where_recorded(vm, seen)
            memory_where_recorded(vm, seen, st["guest"], st["layout"]["numa_nodes"])
            # TCG guests boot the machine KVM guests do (tests/unit/test_qemu_machine.py reads theirs)
            argv = Path(f"/proc/{seen['qemu_pid']}/cmdline").read_bytes().split(b"\0")
            machines = [argv[i + 1].decode() for i, word in enumerate(argv) if word == b"-machine"]
            assert machines and all(m.split(",")[0] in ("q35", "accel=tcg") for m in machines), machines
            assert "q35" in machines and st["guest"]["machine"] == "q35"
        assert len({vm["tap"] for vm in st["layout"]["vms"]}) == 2


def on_its_switch(vm: dict, st: dict) -> None:
    """The guest's link is on its switch as the switch's kind attaches it, read from the kernel and from OVS."""
    (sw,) = [sw for sw in st["layout"]["switches"] if sw["name"] == vm["switch"]]
    (link,) = json.loads(subprocess.run(["ip", "-d", "-j", "link", "show", "dev", vm["tap"]], capture_output=True,
                                        text=True, check=True).stdout)
    kind = link.get("linkinfo", {}).get("info_kind")
    if sw["kind"] == "bridge":
        assert kind == "tun" and link.get("master") == sw["bridge"], link
    elif sw["kind"] == "ovs":  # a port of vnetbench's OVS bridge, which no kernel bridge holds
        db = st["switch_facts"][sw["name"]]["db"]
        port_of = subprocess.run(["ovs-vsctl", *([f"--db={db}"] if db.startswith("unix:") else []), "port-to-br",
                                  vm["tap"]], capture_output=True, text=True, check=True).stdout.strip()
        assert kind == "tun" and port_of == sw["bridge"] and "master" not in link, (link, port_of)
    else:  # a macvtap in bridge mode on the switch's parent, with its guest NIC's MAC, handed to QEMU open
        parent = sw["uplink"][0] if sw.get("uplink") else sw["bridge"]
        assert kind == "macvtap" and link["link"] == parent and link["address"] == vm["mac"], link
        assert link["linkinfo"]["info_data"]["mode"] == "bridge", link
        qemu = st["guests"][vm["name"]]["qemu_pid"]
        device = f"/dev/tap{link['ifindex']}"
        assert any(os.path.realpath(fd) == device for fd in Path(f"/proc/{qemu}/fd").iterdir()), device


def placed_where_recorded(vm: dict, seen: dict) -> None:
    """Every thread of the guest's QEMU but its vCPUs on the VM's own cpus, as the record says, and /proc agrees."""
    from vnetbench.topologies.thishost.host import format_cpulist, parse_cpulist

    placed, own = seen["threads"], format_cpulist(vm["cpus"])
    assert placed["emulator"]["cpus"] == own and placed["emulator"]["threads"] >= 1, placed
    assert placed["vcpus"] == {"threads": vm["vcpus"], "cpus": own} and "not_placed" not in placed, placed
    assert placed["vhost_worker"] is None and placed["virtiofsd"] is None  # no vhost-net, a 9p root here
    vcpus = {pinned["thread"] for pinned in seen["vcpus"].values()}
    for task in Path(f"/proc/{seen['qemu_pid']}/task").iterdir():
        status = dict(line.split(":\t", 1) for line in (task / "status").read_text().splitlines() if ":\t" in line)
        if int(task.name) not in vcpus:  # worker threads started since inherit the main loop's cpus
            assert set(parse_cpulist(status["Cpus_allowed_list"])) <= set(vm["cpus"]), (task.name, status["Name"])


def memory_where_recorded(vm: dict, seen: dict, guest: dict, numa_nodes: int) -> None:
    """The guest's RAM where its VM's policy puts it, on the backing the record says, read from QEMU's numa_maps."""
    memory = seen["memory"]
    assert memory["as_planned"] and set(map(int, memory["mib_by_node"])) <= set(vm["mems"]), memory
    assert memory["backing"] == guest["memory_backing"]["kind"] == "anonymous"  # a 9p root
    assert 0 < sum(memory["mib_by_node"].values()) <= vm["memory"] >> 20
    # numactl only where the host has several nodes: its policy ("interleave:0-1", "bind:1") in QEMU's numa_maps
    assert memory["policy"].startswith(f"{vm['policy']}:") if numa_nodes > 1 else memory["policy"] == "default", memory


def test_no_kvm_probe_for_guests_that_are_up(guests, tmp_path, monkeypatch):
    from vnetbench.topologies import load
    from vnetbench.topologies.qemu import life, probe

    asked = []
    monkeypatch.setattr(probe, "accel", lambda *args, **kwargs: asked.append(args) or ("tcg", None))
    life.preflight(load(str(ONE)))  # up: its guests answer for themselves
    assert asked == []
    other = tmp_path / "other.yaml"
    other.write_text(ONE.read_text().replace("name: gq-one", "name: gq-other"))
    life.preflight(load(str(other)))  # not up: its guests would boot, so the accelerator is decided
    assert len(asked) == 1


def test_openmpi5_pingpong_on_one_switch(guests):
    in_guests(run(guests, ONE, "pingpong", "openmpi5", PINGPONG), ONE)


def test_two_ranks_a_guest_share_memory_there(guests):
    # two ranks in a guest share memory there (vader, in the guest's own /dev/shm), and talk TCP across;
    # allreduce (numpy, no compiled loops): four ranks on two 1-vCPU TCG guests start in seconds
    record = run(guests, ONE, "allreduce", "openmpi4", ALLREDUCE, ranks=4)
    in_guests(record, ONE)
    assert record["launch"]["notes"]["oversubscribed"] and record["launch"]["mca"]["btl"] == "self,sm,tcp"


def test_openmpi4_pingpong_across_two_switches_is_shaped(guests):
    record = run(guests, TWO, "pingpong", "openmpi4", PINGPONG)
    in_guests(record, TWO)
    shaped = record["metrics"]["sizes"][-1]
    assert shaped["bytes"] == 1 << 20
    # tbf lets one bucket (128 KiB) through above the rate: a few per cent over 8 MiB
    assert shaped["bandwidth_mbps"] <= RATE_MBPS * 1.05, f"{shaped['bandwidth_mbps']} MB/s through a 50 Mbit/s uplink"
    one = [r for (topology, kernel, _), r in guests["records"].items() if topology == ONE.name and kernel == "pingpong"]
    if not one:
        pytest.skip("no one-switch pingpong ran to compare with")
    unshaped = max(r["metrics"]["sizes"][-1]["bandwidth_mbps"] for r in one)
    assert unshaped > 2 * RATE_MBPS, "one switch must carry more than the uplink, or the check above shows nothing"


def test_mpich_allreduce_across_two_switches(guests):
    record = run(guests, TWO, "allreduce", "mpich", ALLREDUCE)
    in_guests(record, TWO)
    assert record["environment"]["versions"]["mpi"].startswith("MPICH "), "the guests' ranks loaded MPICH"


def test_report_shows_no_overhead_for_tcg_runs(guests):
    # report compares runs of one MPI library: the native baseline loads MPICH's, as the two-switch run did
    if (TWO.name, "allreduce", "mpich") not in guests["records"]:
        pytest.skip("no MPICH allreduce ran on two switches to report on")
    cli("run", "allreduce", "--topology", "native", "--ranks", "2", "--mpi", FLAVOURS["mpich"], "--store",
        guests["store"], *ALLREDUCE, check=True)
    text = cli("report", "--store", guests["store"], check=True).stdout
    assert "overhead N/A for gq-two (ovs netdev) x2: emulated CPU: not a hypervisor's timing" in text, text


# ---- faults --------------------------------------------------------------------------------------

def test_a_guest_killed_under_a_run_fails_it_naming_the_vm(guests):
    st = state_of(TWO)
    vm2 = next(vm for vm in st["layout"]["vms"] if vm["name"] == "vm2")
    started = sent_to(vm2["tap"])
    # an allreduce of 1 MiB without end: numpy only, so the ranks are exchanging seconds sooner than a compiled kernel's
    proc = subprocess.Popen([sys.executable, "-m", "vnetbench", "run", "allreduce", "--topology", str(TWO), "--ranks",
                             "2", "--mpi", FLAVOURS["openmpi5"], "--json", "--store", str(guests["store"]),
                             "--min-size", "1048576", "--max-size", "1048576", "--large-iterations", "10000000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180
        # the ranks exchange once a megabyte has gone to vm2 (launching them is a few kilobytes)
        while sent_to(vm2["tap"]) - started < 1 << 20 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert proc.poll() is None, f"the run ended before the kill:\n{proc.stderr.read()}"
        os.kill(st["guests"]["vm2"]["qemu_pid"], signal.SIGKILL)
        killed = time.monotonic()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1 and time.monotonic() - killed < 30, err
    (record,) = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert record["status"] == "failed" and "VM vm2's guest is gone" in record["validation"]["detail"]
    assert record["failure"]["vms"] == ["vm2"]
    status = json.loads(cli("topology", "status", "--json", check=True).stdout)
    (row,) = [r for r in status if r["name"] == "gq-two"]
    assert "VM vm2's guest" in row["state"]


def test_a_guest_that_does_not_boot_in_time_leaves_nothing(guests, tmp_path):
    late = tmp_path / "late.yaml"
    late.write_text(ONE.read_text().replace("name: gq-one", "name: gq-late").replace("accel: tcg",
                                                                                      "accel: tcg\n  boot_timeout: 3"))
    done = cli("run", "halo", "--topology", late, "--ranks", "2", "--store", tmp_path / "s.jsonl", *HALO, timeout=120)
    assert done.returncode == 1 and "did not come up within 3 s" in done.stderr, done.stderr
    from vnetbench.topologies import load

    assert ours(load(str(late)).id) == NOTHING


@pytest.mark.parametrize("how", ["ctrl-c", "sigkill"])
def test_an_interrupted_bring_up_leaves_nothing(guests, tmp_path, how):
    from vnetbench.topologies import load

    path = tmp_path / "cut.yaml"
    path.write_text(ONE.read_text().replace("name: gq-one", "name: gq-cut"))
    topology_id = load(str(path)).id
    proc = subprocess.Popen([sys.executable, "-m", "vnetbench", "run", "halo", "--topology", str(path), "--ranks", "2",
                             "--store", str(tmp_path / "s.jsonl"), *HALO], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while len(qemus(topology_id)) < 2 and time.monotonic() < deadline:  # both guests' QEMU going
            time.sleep(0.2)
        assert qemus(topology_id), "the guests never started"
        proc.send_signal(signal.SIGINT if how == "ctrl-c" else signal.SIGKILL)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    if how == "ctrl-c":
        assert proc.returncode == 130, proc.stderr.read()
    else:
        # a run's guests die with it, even of SIGKILL (its watchdog ends them); the taps and state are cleanup's
        killed = time.monotonic()
        while ours(topology_id)["processes"] and time.monotonic() - killed < 15:
            time.sleep(0.2)
        assert not ours(topology_id)["processes"], f"the guests outlived their run: {ours(topology_id)}"
        print(f"\nguests of a SIGKILLed run ended {time.monotonic() - killed:.1f} s after it")
        cleaned = cli("topology", "cleanup", check=True)
        assert "gq-cut" in cleaned.stdout + cleaned.stderr
        assert state_of(ONE)["complete"] and state_of(TWO)["complete"], "cleanup keeps what topology up left up"
    assert ours(topology_id) == NOTHING


# ---- last: the host as it was -----------------------------------------------------------------------

def test_taking_them_down_leaves_the_host_as_found(guests):
    for path in (ONE, TWO):
        cli("topology", "down", path, check=True, timeout=120)
    before = guests["before"]

    def left(now) -> dict:
        # what is new; and of the network, anything changed (other sessions' processes may end meanwhile)
        changed = hoststate.differences(before, now)
        return {part: diff for part, diff in changed.items()
                if diff["new"] or part not in ("processes", "temp_files")}

    assert left(hoststate.settle(lambda now: not left(now))) == {}
