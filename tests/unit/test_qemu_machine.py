"""The qemu backend's guests as a KVM host would run them, read without booting one: the machine type and its vCPU
limit, the memory policies and NUMA nodes' capacity (on a FAKE two-node host: this machine has one node), the KVM
probe's answer kept per boot of the host, and ``--dry-run``'s commands, QEMU's argv included (virtme-run's own
dry run: no guest starts). KVM cannot run here (DESIGN.md), so this is where its command lines are checked."""

import ipaddress
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vnetbench.core.errors import SpecError
from vnetbench.topologies.thishost.host import HostFacts, node_memory
from vnetbench.topologies.qemu import dry, guests, machine, model, plan, probe

TWO_CPUS = HostFacts(cpus_by_node={0: (0, 1)}, memory=24 << 30)
KERNEL = next(iter(sorted(Path("/boot").glob("vmlinuz-*"))), None)
needs_qemu = pytest.mark.skipif(not shutil.which(machine.QEMU), reason=f"{machine.QEMU} is not installed")
needs_virtme = pytest.mark.skipif(not machine.virtme_run() or KERNEL is None,
                                  reason="virtme-run (pip install 'vnetbench[qemu]') and a kernel in /boot")


def fake_two_node_sysfs(tmp_path: Path, gib: dict[int, int]) -> Path:
    """A FAKE /sys/devices/system/node of two nodes (cpus 0-1 and 2-3) with ``gib`` GiB each, as sysfs writes it."""
    for node, size in gib.items():
        folder = tmp_path / f"node{node}"
        folder.mkdir()
        (folder / "cpulist").write_text(f"{2 * node}-{2 * node + 1}\n")
        (folder / "meminfo").write_text(f"Node {node} MemTotal:       {size << 20} kB\n"
                                        f"Node {node} MemFree:        {size << 19} kB\n")
    (tmp_path / "online").write_text("0-1\n")
    return tmp_path


def fake_two_node_host(tmp_path, gib=None) -> HostFacts:
    nodes = node_memory(fake_two_node_sysfs(tmp_path, gib or {0: 8, 1: 8}))
    return HostFacts(cpus_by_node={0: (0, 1), 1: (2, 3)}, memory=sum(nodes.values()), memory_by_node=nodes)


def qemu(vms, host, **guest):
    data = {"name": "lab", "backend": "qemu", "guest": guest, "switches": [{"name": "sw"}],
            "vms": [{"name": f"vm{i + 1}", "switch": "sw", **vm} for i, vm in enumerate(vms)]}
    return model.from_data(data, "FILE", None, host)


# ---- the machine ------------------------------------------------------------------------------

@needs_qemu
def test_one_machine_type_whose_vcpu_limit_qemu_itself_reports():
    found = machine.machine_type()
    assert machine.MACHINE == "q35" and found["name"].startswith("pc-q35-") and found["max_cpus"] >= 255
    many = HostFacts(cpus_by_node={0: tuple(range(found["max_cpus"] + 8))}, memory=1 << 40)
    qemu([{"vcpus": found["max_cpus"], "memory": "1GB"}], many)  # at the limit: fine
    with pytest.raises(SpecError) as caught:
        qemu([{"vcpus": 1, "memory": "1GB"}, {"vcpus": found["max_cpus"] + 1, "memory": "1GB"}], many)
    said = str(caught.value)
    assert said.startswith("FILE: vms[1].vcpus: ") and f"allowed: 1 to {found['max_cpus']}" in said
    assert f"QEMU's q35 machine ({found['name']})" in said and "\n" not in said


def test_both_accelerators_boot_the_same_machine_and_only_tcg_turns_off_ioeventfds():
    topo = qemu([{"vcpus": 1, "memory": "512MB"}], TWO_CPUS)
    lay = plan.layout(topo, TWO_CPUS, ipaddress.IPv4Network("10.213.9.0/24"))
    facts = {"kernel": {"image": "/boot/vmlinuz-test"}, "vhost": True, "rootfs": "9p", "machine": "q35"}
    kvm, tcg = (guests.options(lay, lay.vms[0], {**facts, "accel": accel}) for accel in ("kvm", "tcg"))
    assert kvm[-2:] == ["-machine", "q35,accel=kvm"] and tcg[-4:-2] == ["-machine", "q35"]
    assert "tap,id=n0,ifname=" in kvm[kvm.index("-netdev") + 1] and kvm[kvm.index("-netdev") + 1].endswith(",vhost=on")


# ---- memory: policies, nodes' capacity, backing ---------------------------------------------------------

def test_interleave_interleaves_and_local_binds_on_a_fake_two_node_host(tmp_path):
    host = fake_two_node_host(tmp_path)
    assert host.memory_by_node == {0: 8 << 30, 1: 8 << 30}
    topo = qemu([{"vcpus": 2, "memory": "2GB", "memory_policy": "interleave"},
                 {"vcpus": 2, "memory": "2GB", "memory_policy": "local"}], host)
    lay = plan.layout(topo, host, ipaddress.IPv4Network("10.213.9.0/24"))
    assert lay.numa_nodes == 2
    assert plan.numactl(lay, lay.vms[0]) == ["numactl", "--interleave=0,1"]
    assert plan.numactl(lay, lay.vms[1]) == ["numactl", f"--membind={lay.vms[1].mems[0]}"]
    one = plan.layout(qemu([{"vcpus": 1, "memory": "1GB", "memory_policy": "interleave"}], TWO_CPUS), TWO_CPUS,
                      ipaddress.IPv4Network("10.213.9.0/24"))
    assert plan.numactl(one, one.vms[0]) == []  # one node: nothing to hold the memory to


def test_guests_beyond_a_nodes_memory_are_refused_at_load_naming_node_and_shortfall(tmp_path):
    host = fake_two_node_host(tmp_path, {0: 8, 1: 4})
    # packed: two 2-vCPU VMs fill a node's cpus each; node 1's VM asks 6 GiB of its 4
    with pytest.raises(SpecError) as caught:
        qemu([{"vcpus": 2, "memory": "6GB"}, {"vcpus": 2, "memory": "6GB"}], host)
    said = str(caught.value)
    assert "NUMA node 1: its guests' memory is 6.0 GiB (vm2 6.0 GiB), 2.0 GiB more than its 4.0 GiB" in said, said
    assert "node 0" not in said and "\n" not in said
    # interleaved over both nodes, the same guests fit: 6 GiB each side of 8 + 4... node 1 holds 3 + 3
    with pytest.raises(SpecError, match="NUMA node 1: its guests' memory is 6.0 GiB .*2.0 GiB more"):
        qemu([{"vcpus": 2, "memory": "6GB", "memory_policy": "interleave"},
              {"vcpus": 2, "memory": "6GB", "memory_policy": "interleave"}], host)
    qemu([{"vcpus": 2, "memory": "4GB", "memory_policy": "interleave"},
          {"vcpus": 2, "memory": "4GB", "memory_policy": "interleave"}], host)


def test_the_root_share_never_changes_the_guests_pages(tmp_path):
    for anon, shmem in (("always [madvise] never", "always within_size advise [never] deny force"),
                        ("[always] madvise never", "always within_size [advise] never deny force")):
        (tmp_path / "enabled").write_text(anon + "\n")
        (tmp_path / "shmem_enabled").write_text(shmem + "\n")
        nine, fs = machine.backing("9p", tmp_path), machine.backing("virtiofs", tmp_path)
        assert (nine["kind"], fs["kind"]) == ("anonymous", "memfd")
        same = nine["page_size"] == fs["page_size"]
        assert same == ("[advise]" in shmem), (nine, fs)
    if machine.backing("virtiofs")["page_size"] != machine.backing("9p")["page_size"]:
        assert machine.root_share() == "9p"  # this host's THP settings: virtiofs would change the pages


# ---- the KVM probe: what it boots, its answer kept per boot -------------------------------------------

def test_the_probe_boots_what_the_guests_use():
    topo = qemu([{"vcpus": 1, "memory": "512MB"}, {"vcpus": 2, "memory": "3GB"}],
                HostFacts(cpus_by_node={0: (0, 1, 2)}, memory=24 << 30))
    probed = probe.needs(topo, True, "virtiofs")
    assert probed == {"machine": "q35", "rootfs": "virtiofs", "vhost": True, "memory_mib": 3072, "vcpus": 2}
    argv = probe.argv("/boot/vmlinuz-test", probed)
    assert argv[argv.index("--memory") + 1] == "3072M" and argv[argv.index("--cpus") + 1] == "2"
    assert "--force-9p" not in argv and ["-machine", "q35,accel=kvm"] == argv[argv.index("--qemu-opts") + 1:][:2]
    assert any(word.startswith("tap,") and word.endswith(",vhost=on") for word in argv)
    assert "--force-9p" in probe.argv("/boot/vmlinuz-test", {**probed, "rootfs": "9p", "vhost": False})
    assert probe.vhost_said("qemu-system-x86_64: warning: vhost_set_vring_call failed\nx") is not None
    assert probe.vhost_said("Linux version 6.1\nvnetbench-kvm-probe-ok") is None


def test_the_probes_answer_is_kept_until_the_host_reboots_or_kvm_or_qemu_change(tmp_path):
    boot, kvm, qemu_binary, image = (tmp_path / name for name in ("boot_id", "kvm", "qemu-system-FAKE", "vmlinuz"))
    for path, text in ((boot, "b1\n"), (kvm, ""), (qemu_binary, "v1"), (image, "k")):
        path.write_text(text)
    cache, probed = tmp_path / "kvm-probe.json", {"machine": "q35", "rootfs": "9p", "vhost": False,
                                                   "memory_mib": 512, "vcpus": 1}

    def now():
        return probe.identity(str(qemu_binary), kvm, boot)

    answer = {"problem": "a probe guest did not start with KVM (QEMU exited 1: x)", "vhost": None, "at": 0.0}
    probe.keep(str(image), probed, now(), answer, cache)
    assert probe.kept(str(image), probed, now(), cache) == answer
    assert probe.kept(str(image), {**probed, "memory_mib": 4096}, now(), cache) is None  # another size: probed anew
    os.utime(qemu_binary, ns=(1, 1))  # QEMU reinstalled
    assert probe.kept(str(image), probed, now(), cache) is None
    probe.keep(str(image), probed, now(), answer, cache)
    boot.write_text("b2\n")  # the host rebooted
    assert probe.kept(str(image), probed, now(), cache) is None
    assert json.loads(cache.read_text())["identity"]["boot_id"] == "b1"


# ---- --dry-run: the KVM command lines, on a host without KVM ---------------------------------------------

@needs_virtme
def test_dry_run_shows_the_kvm_guests_qemu_argv(tmp_path):
    done = subprocess.run([sys.executable, "-m", "vnetbench", "topology", "up", "2vm-2vswitch", "--vms", "qemu",
                           "--accel", "kvm", "--dry-run"], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    qemus = [line for line in lines if line.startswith("/") and "qemu-system-x86_64 " in line]
    assert len(qemus) == 2, done.stdout
    for line in qemus:
        argv = shlex.split(line)
        machines = [argv[i + 1] for i, word in enumerate(argv) if word == "-machine"]
        # virtme-ng's own "accel=kvm:tcg" first, then vnetbench's: QEMU merges them, the last accel wins
        assert machines[-1] == "q35,accel=kvm" and not any(m.startswith(("pc,", "pc-i440fx")) for m in machines)
        assert argv[argv.index("-cpu") + 1].startswith("host")
        netdev = argv[argv.index("-netdev") + 1]
        assert netdev.endswith(",vhost=on") == machine.vhost_net(), netdev
        assert "virtio-pci.ioeventfd=off" not in argv and "init_on_alloc=0" not in line
    assert sum(line.startswith("ip tuntap add dev ") for line in lines) == 2
    assert any(line.startswith("tc qdisc add dev ") for line in lines)
    # nothing was made: no state, no interface of it
    from vnetbench.topologies import load
    from vnetbench.topologies.thishost import state

    assert state.read(load("qemu:2vm-2vswitch?accel=kvm").id) is None


@needs_virtme
def test_dry_run_on_a_fake_two_node_host_shows_numactl(tmp_path):
    host = fake_two_node_host(tmp_path)
    topo = qemu([{"vcpus": 2, "memory": "1GB", "memory_policy": "interleave"},
                 {"vcpus": 2, "memory": "1GB", "memory_policy": "remote"}], host, accel="kvm")
    lines = dry.lines(topo, host)
    starts = [shlex.split(line) for line in lines if "virtme-run" in line and not line.startswith("#")]
    assert [argv[:2] for argv in starts] == [["numactl", "--interleave=0,1"], ["numactl", "--membind=0"]]


# ---- what a guest got, read from /proc: on this test's own memory, and a process of threads -------------------

def test_a_mapping_of_the_guests_size_is_found_and_read_from_numa_maps():
    import mmap

    from vnetbench.topologies.qemu import seen

    if not Path("/proc/self/numa_maps").exists():
        pytest.skip("this kernel has no numa_maps (CONFIG_NUMA)")
    # an odd size, the only mapping of it in this process (other tests' arrays come in round sizes): as a guest's
    # RAM in its QEMU
    size = (40 << 20) + 7 * 4096
    ram = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    # flags of its own, so that the kernel does not merge it with a neighbouring anonymous mapping of this process
    # (pages touched there counted as its own)
    ram.madvise(mmap.MADV_NOHUGEPAGE)
    try:
        for offset in range(0, 8 << 20, 4096):  # touch 8 MiB of it
            ram[offset] = 1
        found = seen.memory(os.getpid(), size, (0,))
        assert found["backing"] == "anonymous" and found["as_planned"] and found["policy"] == "default", found
        assert 8 <= sum(found["mib_by_node"].values()) <= 10, found
        assert seen.memory(os.getpid(), 1 << 40, (0,)) == {"problem": "no mapping of the guest's memory size in "
                                                                      "its QEMU's maps"}
    finally:
        ram.close()


def test_threads_other_than_the_vcpus_go_where_they_are_declared():
    from vnetbench.topologies.qemu import seen

    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("one cpu: nothing to place a thread away from")
    # a process of three threads standing in for a QEMU: its "vCPU" thread is its main one
    proc = subprocess.Popen([sys.executable, "-c", "import threading, time\n"
                             "for _ in range(2): threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
                             "print('up', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "up"
        placed = seen.place(proc.pid, {proc.pid}, (cpus[-1],), [])
        assert placed["emulator"] == {"threads": 2, "cpus": str(cpus[-1])} and placed["vhost_worker"] is None
        assert placed["vcpus"]["threads"] == 1 and placed["vcpus"]["cpus"] != str(cpus[-1])
        assert seen.vhost(False, "", proc.pid) == "userspace virtio (vhost not asked for)"
        assert seen.vhost(True, "", proc.pid) == "fell back to userspace (no vhost worker of its QEMU)"
        assert seen.vhost(True, "qemu: falling back on userspace virtio\n", proc.pid).startswith(
            "fell back to userspace (qemu: falling back on userspace virtio")
    finally:
        proc.kill()
        proc.wait()
