"""The guests themselves: started with virtme-ng's launcher, watched until their sshd answers, pinned, ended.

Each guest is ``virtme-run`` (virtme-ng: it boots a kernel with the host's root shared read-only, private
overlays on /etc, /var and /tmp, a tmpfs on /run) in a session of its own, with QEMU's extra arguments for
its NIC (a tap on its switch's bridge, vhost where /dev/vhost-net opens), a QMP socket and a pid file in the
topology's state directory, and guest.sh as its only command. Every process of a guest carries
``VNETBENCH_QEMU_GUEST=<state dir>/<vm>`` in its environment: that, not a pid that may be reused, is what
teardown and cleanup end. Its temporary files (virtme-ng's) are in the state directory too.
"""

import os
import re
import shlex
import socket
import subprocess
import time
from pathlib import Path

from vnetbench.core import procs
from vnetbench.core.errors import LaunchError

from ..thishost import linux, state
from . import machine
from .plan import SSH_PORT, GuestPlan, Layout, files, numactl
from .qmp import Qmp

MARK = "VNETBENCH_QEMU_GUEST"
GUEST_SCRIPT = Path(__file__).with_name("guest.sh")
CACHED_ROOT_SCRIPT = Path(__file__).with_name("cached-root.sh")  # guest.sh's cached view of the host's root
# the guests' private writable places beside /run (virtme-ng's own tmpfs): the brief of a throwaway system
OVERLAYS = ("/etc", "/var", "/tmp")
READY = re.compile(r"vnetbench-guest-ready (.*)")
FAILED = re.compile(r"vnetbench-guest-failed (.*)")
POLL = 0.2
CACHED_TAG = "vnbroot"
# Drivers a guest never uses that udev's coldplug (virtme-ng's init waits for it) would load at every boot: the
# q35 machine's (machine.MACHINE, under either accelerator: under KVM QEMU's default pc would load ata_piix and
# floppy instead, past this list) SATA controller and DVD drive, its platform devices, nested virtualization (QEMU's "max" and
# "host" CPUs carry SVM or VMX, so kvm loads inside the guest) and kernel crypto and checksum engines that
# nothing in a guest of 9p, tmpfs and overlays calls. Each costs a module load and a device probe: under TCG
# they were 3 of a boot's 12 s. Nothing vnetbench runs in a guest needs them, whatever the accelerator.
UNUSED_MODULES = ("kvm", "kvm_amd", "kvm_intel", "ccp", "ahci", "libahci", "libata", "sr_mod", "cdrom", "sg",
                  "iTCO_wdt", "iTCO_vendor_support", "intel_pmc_bxt", "lpc_ich", "i2c_i801", "pcspkr", "psmouse",
                  "serio_raw", "evdev", "button", "aesni_intel", "ghash_clmulni_intel", "sha1_ssse3", "sha256_ssse3",
                  "sha512_ssse3", "crc32_pclmul", "crc32c_intel", "crct10dif_pclmul")
# Under TCG only (an emulated CPU: the guests are there for behaviour, their timings N/A in every report), the guest's
# kernel leaves its pages as the page allocator gives them: Debian's kernel zeroes every page it allocates
# (init_on_alloc, a hardening default), page cache and slab included, each a clearing by the emulated CPU. Under KVM
# the guests keep their kernel's defaults, as the VMs they stand for do.
TCG_KERNEL_OPTIONS = ("init_on_alloc=0",)
# And under TCG only, QEMU handles a guest's virtqueue kicks in the vCPU thread that emulates the write, not through
# an ioeventfd: with one, each kick (every 9p request of a Python import, every packet) is an eventfd signal that wakes
# QEMU's main loop, which polls all of its file descriptors and takes the big lock back from the vCPU thread before it
# reads the queue. Under KVM an ioeventfd spares a kick an exit to QEMU; under TCG the vCPU is in QEMU already.
# benchmarks/tcg_guest.py boots a guest with neither setting, the kernel options alone and both, alternated: on a
# 2-core EPYC VM its QEMU used 44.3, 39.4 and 31.0 CPU-s (medians of 3) to boot and import numpy and numba twice.
TCG_QEMU_OPTIONS = ("-global", "virtio-pci.ioeventfd=off")


def cached_root_export(tag: str) -> list[str]:
    """QEMU's options exporting the host's root again, read-only, as 9p ``tag``: for cached-root.sh to mount in
    the guest with a cache (virtme-ng's own export has none)."""
    return ["-fsdev", f"local,id={tag},path=/,security_model=none,readonly=on,multidevs=remap",
            "-device", f"virtio-9p-pci,fsdev={tag},mount_tag={tag}"]


def tap_device(tap: str) -> str:
    """The character device of macvtap ``tap`` (/dev/tapIFINDEX), which its guest's QEMU is handed open. The index
    is this network namespace's (not sysfs's, which may show another's)."""
    return f"/dev/tap{socket.if_nametoindex(tap)}"


def netdev(vm: GuestPlan, switch, guest: dict, fd: int | None = None) -> str:
    """QEMU's ``-netdev`` of ``vm``'s link: a tap QEMU attaches to by name, or (a switch whose driver's links are
    devices: macvtap) the device open as ``fd`` in QEMU (None: not opened yet, as ``--dry-run`` shows it)."""
    if switch.driver.tap_is_device:
        attach = f"tap,id=n0,fd={fd if fd is not None else 'FD'}"
    else:
        attach = f"tap,id=n0,ifname={vm.tap},script=no,downscript=no"
    return attach + (",vhost=on" if guest["vhost"] else "")


def options(lay: Layout, vm: GuestPlan, guest: dict, fd: int | None = None) -> list[str]:
    """virtme-run's options for ``vm`` (``guest``: the state's guest facts: kernel, accel, vhost, rootfs; ``fd``: its
    link's device open in the launcher, for a switch whose links are devices)."""
    from .sshd import folders, numba_cache

    shared = str(folders(lay.id)[0])
    own = files(lay.id, vm.name)
    switch = lay.switch(vm.switch)
    command = ["/bin/sh", str(GUEST_SCRIPT), vm.mac, f"{vm.address}/{lay.prefixlen}", shared]
    if guest["rootfs"] == "9p":
        command.append(CACHED_TAG)
    args = ["--kimg", guest["kernel"]["image"], "--mods", "auto", "--name", vm.hostname,
            "--memory", f"{vm.memory >> 20}M", "--cpus", str(vm.vcpus), "--disable-microvm",
            "--kopt", f"modprobe.blacklist={','.join(UNUSED_MODULES)}"]
    if guest["accel"] == "tcg":
        args += ["--disable-kvm", *(word for option in TCG_KERNEL_OPTIONS for word in ("--kopt", option))]
    args += ["--force-9p"] if guest["rootfs"] == "9p" else []
    for place in OVERLAYS:
        args += ["--overlay-rwdir", place]
    args += [f"--rodir={shared}", f"--rwdir={numba_cache()}", "--script-sh", shlex.join(command),
             # --qemu-opts takes the rest: it comes last
             "--qemu-opts", "-netdev", netdev(vm, switch, guest, fd), "-device",
             f"virtio-net-pci,netdev=n0,mac={vm.mac}{switch.driver.nic_options(switch)}",
             "-qmp", f"unix:{own['qmp']},server=on,wait=off", "-pidfile", own["pidfile"]]
    if guest["rootfs"] == "9p":
        args += cached_root_export(CACHED_TAG)
    if guest["accel"] == "kvm":
        # the machine type virtme-ng asks for under TCG only (QEMU merges -machine options: the last accel wins);
        # KVM or nothing: no silent fallback to TCG
        args += ["-machine", f"{guest.get('machine', machine.MACHINE)},accel=kvm"]
    else:
        args += ["-machine", guest.get("machine", machine.MACHINE), *TCG_QEMU_OPTIONS]
    return args


def launch_command(lay: Layout, vm: GuestPlan, guest: dict, fd: int | None = None) -> list[str]:
    """The whole command that starts ``vm``'s guest: numactl where the host has several NUMA nodes, virtme-run."""
    return [*numactl(lay, vm), machine.virtme_run() or "virtme-run", *options(lay, vm, guest, fd)]


def start(lay: Layout, guest: dict) -> dict[str, subprocess.Popen]:
    """Start every guest of ``lay`` at once; vm name -> its launcher (virtme-run)."""
    started = {}
    for vm in lay.vms:
        own = files(lay.id, vm.name)
        Path(own["tmp"]).mkdir(mode=0o700, exist_ok=True)
        env = {**os.environ, "TMPDIR": own["tmp"], MARK: marker(lay.id, vm.name)}
        cpus = set(vm.cpus)
        # a macvtap's device, open here and inherited through virtme-run (which execs QEMU) as QEMU's fd
        fd = os.open(tap_device(vm.tap), os.O_RDWR) if lay.switch(vm.switch).driver.tap_is_device else None
        try:
            command = launch_command(lay, vm, guest, fd)
            with open(own["console"], "wb") as console:
                # QEMU and its threads start on the VM's cpus; each vCPU thread is pinned to one of them once QMP
                # answers
                proc = subprocess.Popen(list(command), stdin=subprocess.DEVNULL, stdout=console,
                                        stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                        pass_fds=() if fd is None else (fd,),
                                        preexec_fn=lambda: os.sched_setaffinity(0, cpus))
        finally:
            if fd is not None:
                os.close(fd)
        started[vm.name] = proc
    return started


def marker(topology_id: str, vm: str) -> str:
    return str(state.directory(topology_id) / vm)


def wait_ready(lay: Layout, guest: dict, started: dict[str, subprocess.Popen], timeout: float) -> dict[str, dict]:
    """Wait for every guest's "ready" line and sshd, pinning its vCPUs as soon as its QMP answers; vm name ->
    what it said (nic, kernel, hypervisor) and its QEMU's pid, accelerator and vCPU threads. LaunchError naming
    the first guest that failed, died or did not come up in ``timeout`` s, with its console's last lines."""
    deadline = time.monotonic() + timeout
    facts = {vm.name: {} for vm in lay.vms}
    while True:
        waiting = False
        for vm in lay.vms:
            seen = facts[vm.name]
            if "ready" in seen:
                continue
            waiting = True
            own = files(lay.id, vm.name)
            text = _tail(own["console"])
            failed = FAILED.search(text)
            if failed:
                raise LaunchError(f"VM {vm.name}: its guest could not set itself up: {failed.group(1).strip()}")
            if "qemu_pid" not in seen and os.path.exists(own["qmp"]) and os.path.exists(own["pidfile"]):
                seen.update(_pinned(vm, own, guest))
            if started[vm.name].poll() is not None or "qemu_pid" in seen and not _alive(seen):
                raise LaunchError(f"VM {vm.name}: its guest ended before it was up ({_last_lines(text)})")
            found = READY.search(text)
            if found and "qemu_pid" in seen and _answers(vm.address):
                seen.update(_said(found.group(1)), **_settled(lay, vm, guest, seen), ready=True)
        if not waiting:
            return {name: {k: v for k, v in seen.items() if k != "ready"} for name, seen in facts.items()}
        if time.monotonic() > deadline:
            late = [vm for vm in lay.vms if "ready" not in facts[vm.name]]
            vm = late[0]
            raise LaunchError(f"VM {vm.name}{f' (and {len(late) - 1} more)' if len(late) > 1 else ''}: its guest did "
                              f"not come up within {timeout:g} s ({guest['accel']}); its console's last lines: "
                              f"{_last_lines(_tail(files(lay.id, vm.name)['console']))}")
        time.sleep(POLL)


def _pinned(vm: GuestPlan, own: dict, guest: dict) -> dict:
    """Ask QEMU what it is (KVM or not, its version, its vCPU threads) and pin each vCPU thread to one of the
    VM's cpus."""
    try:
        qemu_pid = int(Path(own["pidfile"]).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return {}  # being written
    with Qmp(own["qmp"]) as qmp:
        kvm = qmp.command("query-kvm")
        version = qmp.command("query-version").get("qemu", {})
        threads = {cpu["cpu-index"]: cpu["thread-id"] for cpu in qmp.command("query-cpus-fast")}
    if guest["accel"] == "kvm" and not kvm.get("enabled"):
        raise LaunchError(f"VM {vm.name}: QEMU runs it without KVM although KVM was asked for")
    pinned = {}
    for index, thread in sorted(threads.items()):
        cpu = vm.cpus[index % len(vm.cpus)]
        try:
            os.sched_setaffinity(thread, {cpu})
        except OSError as exc:
            raise LaunchError(f"VM {vm.name}: vCPU {index} (thread {thread}) cannot be pinned to cpu {cpu}: "
                              f"{exc.strerror}") from None
        pinned[str(index)] = {"thread": thread, "cpu": cpu}
    return {"qemu_pid": qemu_pid, "qemu_start": procs.start_time(qemu_pid), "kvm": bool(kvm.get("enabled")),
            "qemu": f"{version.get('major')}.{version.get('minor')}.{version.get('micro')}", "vcpus": pinned}


def _settled(lay: Layout, vm: GuestPlan, guest: dict, seen: dict) -> dict:
    """Once the guest is up (its NIC's driver started, vhost's worker with it): its other threads placed, and what
    it got (seen.py)."""
    from . import seen as got

    try:
        console = Path(files(lay.id, vm.name)["console"]).read_text(errors="replace")
    except OSError:
        console = ""
    return got.settle(vm, guest, seen["qemu_pid"], {int(v["thread"]) for v in seen.get("vcpus", {}).values()},
                      console, MARK, marker(lay.id, vm.name))


def _said(text: str) -> dict:
    said = dict(part.split("=", 1) for part in text.split() if "=" in part)
    return {"nic": said.get("nic"), "kernel": said.get("kernel"), "hypervisor": said.get("hypervisor") == "1",
            "booted_in_s": float(said["uptime"]) if re.fullmatch(r"[0-9.]+", said.get("uptime", "")) else None}


def _answers(address: str) -> bool:
    try:
        with socket.create_connection((address, SSH_PORT), timeout=1.0) as sock:
            sock.settimeout(2.0)
            return sock.recv(4).startswith(b"SSH-")
    except OSError:
        return False


def _alive(seen: dict) -> bool:
    return procs.start_time(seen["qemu_pid"]) == seen["qemu_start"]


def alive(facts: dict) -> bool:
    """Is this guest's QEMU (as ``wait_ready`` found it) still running?"""
    return "qemu_pid" in facts and _alive(facts)


def _tail(path: str, size: int = 64 << 10) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - size))
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def _last_lines(text: str, count: int = 4) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(lines[-count:])[-600:] or "nothing on its console"


# ---- ending them ----------------------------------------------------------------------------

def processes(topology_ids=None, unknown: set[str] | None = None) -> dict[int, str]:
    """pid -> its guest marker, for every process of a guest of ``topology_ids`` (or, with ``unknown``, of a
    topology whose id is not in it: an orphan). Only processes whose marker names our state directory: a
    guest started in another mount namespace (the test suite's second lane) has a /run/vnetbench of its own."""
    found = {}
    for pid, marker in procs.marked(MARK, state.RUN_DIR).items():
        topology_id = marker[len(f"{state.RUN_DIR}/"):].split("/")[0]
        if (topology_ids is not None and topology_id in topology_ids) or \
                (unknown is not None and state.ID.fullmatch(topology_id) and topology_id not in unknown):
            found[pid] = marker
    return found


STOP_ROUNDS = 5


def stop(topology_id: str) -> list[int]:
    """End every process of the topology's guests: QEMU first (SIGTERM: it stops the guest at once), then
    virtme-ng's launcher and whatever else is left; their pids. Again until a look finds none: virtme-run forks,
    then execs QEMU in the child, and on SIGTERM it exits, so a launcher that forked after the look that found it
    (its guest's start cut short: a Ctrl-C during bring-up, on a loaded machine) leaves that QEMU running."""
    ended: set[int] = set()
    for _ in range(STOP_ROUNDS):
        found = processes({topology_id})
        if not found:
            break
        qemus = [pid for pid in found if (linux.command_name(pid) or "").startswith("qemu-system")]
        procs.kill(qemus, grace=2.0)
        rest = processes({topology_id})
        procs.kill(sorted(rest), grace=2.0)
        ended |= set(found) | set(rest)
    return sorted(ended)
