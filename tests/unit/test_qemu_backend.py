"""The qemu backend's pure parts: its refs and YAML form, its plan (taps, MACs, cpus), how ranks reach its guests
(the hosts backend's SSH launch, rendered by every flavour), its state's names, TCG records shown as N/A, and the
end of a guest's processes (with a fake launcher). The guests themselves are booted in tests/guest/test_qemu.py."""

import ipaddress
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from vnetbench.analysis import compare, report, tables
from vnetbench.core.errors import SpecError, UsageError
from vnetbench.topologies import base
from vnetbench.topologies.thishost import fabric, state
from vnetbench.topologies.thishost.host import HostFacts
from vnetbench.topologies.qemu import guests, model, plan, sshd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "data" / "stores"))
import craft  # noqa: E402

TWO_CPUS = HostFacts(cpus_by_node={0: (0, 1)}, memory=24 << 30)
KERNEL = next(iter(sorted(Path("/boot").glob("vmlinuz-*"))), None)


def qemu(name="lab", vms=2, switches=1, memory="512MB", host=TWO_CPUS, **guest):
    names = ["sw1"] if switches == 1 else [f"sw{i + 1}" for i in range(switches)]
    data = {"name": name, "backend": "qemu", "guest": guest,
            "switches": [{"name": n, **({"uplink": {"rate": "100mbit"}} if switches > 1 else {})} for n in names],
            "vms": [{"name": f"vm{i + 1}", "vcpus": 1, "memory": memory, "switch": names[i % len(names)]}
                    for i in range(vms)]}
    return model.from_data(data, "FILE", None, host)


def test_the_registry_line_is_all_vnetbench_says_of_it():
    assert base.BACKENDS["qemu"].module == "qemu" and "qemu" in base.ref_prefixes(with_plugins=False)
    assert base.backend("qemu").backend == "qemu"


def test_vms_qemu_turns_a_preset_into_its_twin_with_the_options():
    twin = model.load("qemu:2vm-2vswitch?accel=tcg")
    assert (twin.name, twin.backend, twin.guest.accel) == ("2vm-2vswitch-qemu", "qemu", "tcg")
    assert [sw.uplink.rate for sw in twin.switches] == [10**9, 10**9]  # the same switches and uplinks
    assert twin.to_dict()["guest"] == {"accel": "tcg"} and twin.spec_hash() != model.load("qemu:2vm-2vswitch").spec_hash()


def test_a_twin_loads_again_from_its_own_spec(tmp_path):
    import yaml

    twin = model.load("qemu:2vm-1vswitch?accel=tcg")
    path = tmp_path / "twin.yaml"
    path.write_text(yaml.safe_dump(twin.to_dict()))
    again = model.load(f"qemu:{path}")  # says backend: qemu itself: not renamed again
    assert again.name == twin.name and again.guest == twin.guest


@pytest.mark.parametrize("ref, expected", [
    ("qemu:2vm-1vswitch?accel=warp", "guest.accel"),
    ("qemu:2vm-1vswitch?kernel=/no/such/kernel", "guest.kernel: /no/such/kernel: no such file"),
    ("qemu:2vm-1vswitch?speed=max", "unknown setting 'speed'"),
    ("qemu:nowhere.yaml", "neither a preset nor a topology file"),
])
def test_bad_refs_are_one_line_naming_what(ref, expected):
    with pytest.raises(UsageError) as caught:
        model.load(ref)
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_a_guest_needs_memory_and_all_of_them_no_more_than_the_host():
    with pytest.raises(SpecError, match=r"vms\[0\]\.memory: 128 MiB is too little for a guest"):
        qemu(memory="128MB")
    with pytest.raises(SpecError, match="the guests' memory adds up to 30.0 GiB, above this host's 24.0 GiB"):
        qemu(vms=2, memory="15GB")


def test_the_guest_mapping_is_located_in_the_file(tmp_path):
    from vnetbench.topologies import load

    path = tmp_path / "t.yaml"
    path.write_text("name: lab\nbackend: qemu\nguest:\n  accel: fast\nswitches: [{name: s}]\n"
                    "vms: [{name: a, vcpus: 1, memory: 512MB, switch: s}]\n")
    with pytest.raises(SpecError, match=r"t.yaml:4: guest.accel"):
        load(str(path))


def test_layout_gives_each_guest_a_tap_a_mac_and_an_address():
    topo = qemu(vms=2, switches=2)
    lay = plan.layout(topo, TWO_CPUS, ipaddress.IPv4Network("10.213.9.0/24"))
    assert [vm.tap for vm in lay.vms] == [f"vnb{topo.id}t0", f"vnb{topo.id}t1"]
    assert all(state.ANY_LINK.fullmatch(vm.tap) and len(vm.tap) <= 15 for vm in lay.vms)
    assert [vm.mac for vm in lay.vms] == [f"02:76:{topo.id[:2]}:{topo.id[2:]}:00:00", f"02:76:{topo.id[:2]}:{topo.id[2:]}:00:01"]
    assert [vm.address for vm in lay.vms] == ["10.213.9.2", "10.213.9.3"] and lay.head == "10.213.9.1"
    assert [vm.cpus for vm in lay.vms] == [(0,), (1,)]  # a cpu each, as the emulated VMs'
    assert [vm.bridge for vm in lay.vms] == [sw.bridge for sw in lay.switches]
    lines = fabric.create_lines(lay.fabric, plan.tap_lines(lay))
    assert f"tuntap add dev {lay.vms[0].tap} mode tap" in lines
    assert lines.index(f"link set dev {lay.vms[1].tap} master {lay.vms[1].bridge} up") > lines.index(
        f"link add {lay.vms[1].bridge} type bridge")
    assert plan.Layout.from_dict(json.loads(json.dumps(lay.to_dict()))) == lay


def test_only_tcg_guests_skip_zeroing_their_pages_and_waking_qemus_main_loop_for_each_kick():
    # under TCG, where timings are N/A, the guest kernel skips init_on_alloc's clearing of each page by the emulated
    # CPU; under KVM the guests keep their kernel's defaults, as the VMs they stand for do
    lay = plan.layout(qemu(), TWO_CPUS, ipaddress.IPv4Network("10.213.9.0/24"))
    facts = {"kernel": {"image": "/boot/vmlinuz-test"}, "vhost": False, "rootfs": "9p"}
    tcg, kvm = (guests.options(lay, lay.vms[0], {**facts, "accel": accel}) for accel in ("tcg", "kvm"))

    def kernel_options(args):
        return [args[i + 1] for i, word in enumerate(args) if word == "--kopt"]

    assert "--disable-kvm" in tcg and "init_on_alloc=0" in kernel_options(tcg)
    assert "--disable-kvm" not in kvm and not any("init_on_alloc" in option for option in kernel_options(kvm))
    assert kvm[-2:] == ["-machine", "q35,accel=kvm"] and "virtio-pci.ioeventfd=off" not in kvm
    # and QEMU handles a TCG guest's virtqueue kicks in its vCPU thread, where an ioeventfd only adds a main-loop wake
    assert tcg[-4:] == ["-machine", "q35", "-global", "virtio-pci.ioeventfd=off"] and "accel=kvm" not in tcg
    assert kernel_options(tcg)[0] == kernel_options(kvm)[0] == f"modprobe.blacklist={','.join(guests.UNUSED_MODULES)}"


def test_a_state_of_guests_names_only_what_vnetbench_makes():
    topo = qemu()
    lay = plan.layout(topo, TWO_CPUS, ipaddress.IPv4Network("10.213.9.0/24")).to_dict()
    st = {"id": topo.id, "layout": lay}
    assert state.foreign_names(st) == []
    lay["vms"][1]["tap"] = "eth0"
    assert state.foreign_names(st) == ["interface 'eth0'"]


def test_ranks_reach_the_guests_over_ssh_as_on_hosts(tmp_path):
    from vnetbench.mpi.flavours import OpenMPI4, OpenMPI5

    lay = plan.layout(qemu(vms=2), TWO_CPUS, ipaddress.IPv4Network("10.213.9.0/24"))
    files = []

    def hostfile(entries):
        path = tmp_path / f"hostfile-{len(files)}"
        path.write_text("".join(f"{a} slots={n}\n" for a, n in entries))
        files.append(path)
        return str(path)

    spec = plan.launch_spec(lay, 4, None, ssh_args=sshd.client(lay.id), guests={"vm1": {"nic": "enp0s10"}},
                            hostfile=hostfile)
    assert files[0].read_text() == "10.213.9.2 slots=2\n10.213.9.3 slots=2\n"  # in proportion to vCPUs
    intent = spec.intent
    assert intent.agent is None and intent.prefix == sys.prefix and intent.subnet == lay.subnet
    assert f"-p {plan.SSH_PORT}" in intent.ssh_args and f"/run/vnetbench/{lay.id}/ssh/known_hosts" in intent.ssh_args
    assert "StrictHostKeyChecking=yes" in intent.ssh_args
    assert spec.notes["oversubscribed"] and intent.bind == "none"  # 2 ranks on a 1-vCPU guest
    assert [p["hostname"] for p in spec.expected_placement] == [lay.vms[0].hostname] * 2 + [lay.vms[1].hostname] * 2
    assert spec.placement_labels[0]["nic"] == "enp0s10" and spec.placement_labels[0]["vm_cpus"] == [0]
    program = ["python", "-m", "x"]
    assert "plm_ssh_args" in OpenMPI5("/x/mpirun", "5.0.0").command(intent, program)
    orte = OpenMPI4("/x/mpirun", "4.1.4").command(intent, program)
    assert "plm_rsh_args" in orte
    # a guest's ranks share memory in its own /dev/shm, not in the host's job directory: under 4.x's name too
    assert "btl_vader_backing_directory" in orte and orte[orte.index("btl_vader_backing_directory") + 1] == "/dev/shm"
    assert intent.mca["btl_sm_backing_directory"] == "/dev/shm"
    # MPICH's rendering (an ssh wrapper beside the hostfile) needs the head's address up: tests/guest/test_qemu.py


def test_the_guests_sshd_takes_keys_only():
    config = sshd.sshd_config(Path("/run/vnetbench/abcd/guest"))
    assert "PasswordAuthentication no" in config and "UsePAM no" in config
    assert "AuthorizedKeysFile /run/vnetbench/abcd/guest/authorized_keys" in config


def tcg(records):
    for record in records:
        record["topology"]["guest"] = {"engine": "qemu", "accel": "tcg"}
    return records


def test_records_made_under_tcg_show_no_overhead():
    runs = craft.halo("native", 2, [1.0, 1.0]) + tcg(craft.halo("2vm-1vswitch-qemu", 2, [9.0, 9.0]))
    (table,) = tables.build(runs)
    (row,) = [r for r in table.rows if r.topology == "2vm-1vswitch-qemu"]
    assert row.cells[2].overhead_pct is None and row.cells[2].overhead_na == tables.EMULATED_CPU
    text = report.render_study([table], "table", baseline="native")
    assert f"overhead N/A for 2vm-1vswitch-qemu x2: {tables.EMULATED_CPU}" in text


def test_compare_gives_tcg_runs_no_verdict_but_n_a():
    before = tcg(craft.halo("2vm-1vswitch-qemu", 2, [1.0, 1.01, 0.99]))
    after = tcg(craft.halo("2vm-1vswitch-qemu", 2, [2.0, 2.01, 1.99]))
    result = compare.compare(before, after)
    assert not result.regressed and {c.verdict for c in result.changes} == {"n/a"}
    assert any("n/a:" in line for line in compare.summary_lines(result))
    plain = compare.compare(craft.halo("x", 2, [1.0, 1.01, 0.99]), craft.halo("x", 2, [2.0, 2.01, 1.99]))
    assert plain.regressed  # the same numbers on a real CPU are a regression


def test_vms_option_names_what_it_applies_to(tmp_path):
    import argparse

    from vnetbench.commands import common

    def args(**kw):
        return argparse.Namespace(**{"vms": "emulated", "accel": None, "guest_kernel": None, **kw})

    assert common.vm_ref(args(), "2vm-1vswitch") == "2vm-1vswitch"
    assert common.vm_ref(args(vms="qemu", accel="tcg"), "2vm-1vswitch") == "qemu:2vm-1vswitch?accel=tcg"
    # no VM to boot: refused when it is the one topology named, a sweep's baseline beside others stays native
    with pytest.raises(UsageError, match=r"^--vms qemu: native has no VMs to boot as QEMU guests"):
        common.vm_ref(args(vms="qemu", accel="tcg"), "native")
    assert common.vm_ref(args(vms="qemu", accel="tcg"), "native", lone=False) == "native"
    here = tmp_path / "here.yaml"  # a topology file of this host alone, as native
    here.write_text("name: here\nbackend: local\n")
    with pytest.raises(UsageError, match=rf"^--vms qemu: {here} has no VMs to boot as QEMU guests"):
        common.vm_ref(args(vms="qemu"), str(here))
    with pytest.raises(UsageError, match="--accel: only with --vms qemu or a topology file of backend: qemu"):
        common.vm_ref(args(accel="kvm"), "1vm")
    with pytest.raises(UsageError, match="--guest-kernel: /none: no such file"):
        common.vm_ref(args(vms="qemu", guest_kernel="/none"), "1vm")
    if KERNEL:
        assert common.vm_ref(args(vms="qemu", guest_kernel=str(KERNEL)), "1vm") == f"qemu:1vm?kernel={KERNEL}"
    for hosts in ("hostfile:/etc/hosts", "inventory:/etc/hosts", "slurm:part/2nodes-1switch"):
        with pytest.raises(UsageError, match=r"--vms qemu: .* names real hosts or a cluster \(\w+:\), which have "
                                             r"no VMs to boot"):
            common.vm_ref(args(vms="qemu", accel="tcg"), hosts)


# a stand-in for virtme-run (a fake: the real one's fork of QEMU cannot be timed against a SIGTERM here): marked as a
# guest's launcher is, on SIGTERM it forks a child that outlives it, as virtme-run's does when it forked QEMU after
# the look that found it; the child carries the mark, as QEMU does
FORKING_LAUNCHER = """
import os, signal, sys, time

def on_term(signum, frame):
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        time.sleep(60)
        os._exit(0)
    os._exit(1)

signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
time.sleep(60)
"""


def test_stopping_a_guest_ends_what_its_launcher_forked_as_it_was_ended(tmp_path, monkeypatch):
    monkeypatch.setattr(state, "RUN_DIR", tmp_path)
    marker = str(tmp_path / "abcd" / "vm1")
    launcher = subprocess.Popen([sys.executable, "-c", FORKING_LAUNCHER], stdout=subprocess.PIPE, text=True,
                                env={"PATH": "/usr/bin:/bin", guests.MARK: marker}, start_new_session=True)
    try:
        assert launcher.stdout.readline() == "ready\n"
        assert list(guests.processes({"abcd"})) == [launcher.pid]
        ended = guests.stop("abcd")
        launcher.wait(5)
        assert guests.processes({"abcd"}) == {}, "the child the launcher forked on SIGTERM is still running"
        assert launcher.pid in ended and len(ended) == 2
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
        launcher.stdout.close()
        for pid in guests.processes({"abcd"}):
            os.kill(pid, signal.SIGKILL)


def test_a_runs_watchdog_ends_its_guests_once_the_run_is_gone_even_by_sigkill(tmp_path, monkeypatch):
    """The watchdog's own part (watchdog.main) with a stand-in guest (a fake: a process marked as a guest's are,
    since no QEMU boots in this tier) and a real run process killed with SIGKILL; tests/guest kills a real run."""
    import threading
    import time

    from vnetbench.topologies.qemu import watchdog

    monkeypatch.setattr(state, "RUN_DIR", tmp_path)
    (tmp_path / "abcd").mkdir()
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    guest = subprocess.Popen(sleeper, env={"PATH": "/usr/bin:/bin", guests.MARK: str(tmp_path / "abcd" / "vm1")})
    run = subprocess.Popen(sleeper)
    try:
        deadline = time.monotonic() + 10
        while not guests.processes({"abcd"}) and time.monotonic() < deadline:  # its environment readable
            time.sleep(0.05)
        owner = {"pid": run.pid, "start": state.start_time(run.pid)}
        watching = threading.Thread(target=watchdog.main, args=(["abcd", str(owner["pid"]), str(owner["start"])],))
        watching.start()
        time.sleep(2 * watchdog.POLL_S)
        assert watching.is_alive() and guest.poll() is None, "the run is alive: its guests stay"
        run.kill()
        killed = time.monotonic()
        watching.join(10)
        assert not watching.is_alive() and guest.wait(5) is not None
        assert time.monotonic() - killed < 5 and guests.processes({"abcd"}) == {}
    finally:
        for proc in (guest, run):
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def test_guest_kernel_that_is_no_regular_file_is_named_for_what_it_is(tmp_path):
    import argparse

    from vnetbench.commands import common

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, kind in (("/dev/zero", "a character device"), (str(tmp_path), "a folder"), (str(fifo), "a FIFO")):
        asked = argparse.Namespace(vms="qemu", accel=None, guest_kernel=path)
        with pytest.raises(UsageError, match=f"^--guest-kernel: {path}: {kind}, not a regular file"):
            common.vm_ref(asked, "1vm")
        with pytest.raises(SpecError, match=f"guest.kernel: {path}: {kind}, not a regular file"):
            qemu(kernel=path)


def test_a_qemu_topology_file_takes_the_guest_options_and_says_where_each_setting_came_from(tmp_path, monkeypatch):
    import argparse

    import yaml

    from vnetbench.commands import common

    path = tmp_path / "lab.yaml"
    data = {"name": "lab", "backend": "qemu", "guest": {"accel": "kvm"}, "switches": [{"name": "sw1"}],
            "vms": [{"name": "vm1", "vcpus": 1, "memory": "512MB", "switch": "sw1"}]}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    # no --vms qemu needed: the file says its VMs are QEMU guests; the options override its guest fields
    ref = common.vm_ref(argparse.Namespace(vms="emulated", accel="tcg", guest_kernel=None), str(path))
    assert ref == f"qemu:{path}?accel=tcg"
    flagged = model.load(ref)
    assert (flagged.name, flagged.guest.accel) == ("lab", "tcg")
    assert flagged.given("accel") == ("--accel tcg", "--accel {}")
    # the file's own guest.accel: its file, line and field, and how to change it there
    from_file = model.load(f"qemu:{path}")
    where, other = from_file.given("accel")
    assert where == f"{path}:4: guest.accel kvm" and other.format("tcg") == f"guest.accel: tcg in {path}"
    assert model.load("qemu:1vm").given("accel")[0] == "--accel auto (the default)"
    # the refusal probe.accel makes of it (the KVM probe itself is the guest tier's)
    from vnetbench.topologies.qemu import machine, probe

    monkeypatch.setattr(machine, "kvm_problem", lambda: "no /dev/kvm (a stand-in reason)")
    with pytest.raises(UsageError) as caught:
        probe.accel("kvm", "/boot/none", {}, from_file.given("accel"))
    text = str(caught.value)
    assert text.startswith(f"{path}:4: guest.accel kvm: KVM cannot run the guests here: no /dev/kvm")
    assert "--accel" not in text and f"guest.accel: tcg in {path} runs the guests functionally" in text
