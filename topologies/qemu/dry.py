"""``topology up|show --vms qemu --dry-run``: every command bringing the topology up would run, nothing started.

For each guest: numactl (where the host has several NUMA nodes), virtme-run's argv, and QEMU's argv as virtme-run
itself builds it (its own ``--dry-run --show-command``: it writes its initramfs to a scratch folder and starts no
guest); before them, the ip and tc batches of the switches and taps; after each, how its threads are placed once it
runs. The accelerator is the one asked for (``auto`` is shown as KVM, which the probe guest would have to accept),
so that a site reads what would run on its KVM host, and the tests read the KVM argv on a host without KVM.
"""

import ipaddress
import os
import re
import shlex
import subprocess
import tempfile

from vnetbench.core.errors import UsageError

from ..thishost import fabric, lifecycle, state
from ..thishost.host import detect, format_cpulist
from . import guests, machine, plan

SHOW_SECONDS = 120.0


def guest_facts(topology) -> dict:
    """The state's ``guest`` as a bring-up would decide it, but for the probe: auto is shown as KVM."""
    chosen = machine.kernel(topology.guest.kernel)
    accel = "tcg" if topology.guest.accel == "tcg" else "kvm"
    rootfs = machine.root_share()
    return {"engine": "qemu", "accel": accel, "asked": topology.guest.accel, "kernel": chosen,
            "machine": machine.MACHINE, "qemu": machine.qemu_version(), "vhost": machine.vhost_net(),
            "rootfs": rootfs, "memory_backing": machine.backing(rootfs)}


def qemu_argv(virtme_argv: list[str]) -> str:
    """QEMU's command line for ``virtme_argv`` (virtme-run's own --dry-run --show-command), or why not."""
    with tempfile.TemporaryDirectory(prefix="vnetbench-dry-run-") as work:
        # virtme-run checks that the folders it shares exist; those a bring-up makes stand in as empty ones here
        stand_ins, args = {}, []
        for arg in virtme_argv:
            option, _, path = arg.partition("=")
            if option in ("--rodir", "--rwdir") and not os.path.isdir(path):
                stand_ins[path] = os.path.join(work, f"share{len(stand_ins)}")
                os.mkdir(stand_ins[path])
                arg = f"{option}={stand_ins[path]}"
            args.append(arg)
        try:
            done = subprocess.run([*args[:1], "--dry-run", "--show-command", *args[1:]],
                                  capture_output=True, text=True, timeout=SHOW_SECONDS, stdin=subprocess.DEVNULL,
                                  env={**os.environ, "TMPDIR": work}, cwd=work)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"(virtme-run did not show it: {exc})"
    text = done.stdout + done.stderr
    found = [line.strip() for line in text.splitlines() if re.match(r"\S*qemu-system-\S+ ", line.strip())]
    if not found:
        tail = " | ".join(line.strip() for line in text.splitlines()[-3:] if line.strip())
        return f"(virtme-run exited {done.returncode} without showing it: {tail or 'no output'})"
    shown = found[-1]
    for path, stand_in in stand_ins.items():  # virtme-ng writes them with and without their leading /
        shown = shown.replace(stand_in, path).replace(stand_in.lstrip("/"), path.lstrip("/"))
    return shown.replace(work, "$TMPDIR")


def lines(topology, host=None) -> list[str]:
    """The commands, one a line (``#`` lines say what they are)."""
    if not machine.virtme_run():
        raise UsageError("--dry-run: virtme-run is not installed (pip install 'vnetbench[qemu]': virtme-ng); it "
                         "builds the guests' QEMU command lines")
    host = host or detect()
    guest = guest_facts(topology)
    current = state.read(topology.id)
    subnet = current["layout"]["subnet"] if current else None
    lay = plan.layout(topology, host, lifecycle.subnet_for(topology, host) if subnet is None else
                      ipaddress.IPv4Network(subnet))
    out = [f"# {topology.name} ({topology.id}) --dry-run: nothing is started"
           + (" (it is up: these are the commands that brought it up)" if current else ""),
           f"# accel {guest['accel']}" + (" (auto: if the KVM probe guest boots with it; else refused)"
                                          if guest["asked"] == "auto" else "")
           + f", machine {guest['machine']}, QEMU {guest['qemu']}, kernel {guest['kernel']['image']}, root over "
             f"{guest['rootfs']} ({guest['memory_backing']['kind']} memory, {guest['memory_backing']['page_size']}), "
             f"vhost {'on' if guest['vhost'] else 'off (/dev/vhost-net does not open)'}",
           f"# switches and taps: the head's bridge {lay.head_bridge} (linux.add_bridge), then ip -batch:"]
    out += [f"ip {line}" for line in fabric.create_lines(lay.fabric, plan.tap_lines(lay))]
    out += [f"tc {line}" for line in fabric.shaping(lay.fabric)]
    for vm in lay.vms:
        own = plan.files(lay.id, vm.name)
        command = guests.launch_command(lay, vm, guest)
        virtme = command[len(plan.numactl(lay, vm)):]
        out += [f"# {vm.name}: started on cpus {format_cpulist(vm.cpus)} (its launcher's affinity), environment "
                f"TMPDIR={own['tmp']} {guests.MARK}={guests.marker(lay.id, vm.name)}"
                + (f"; its macvtap {vm.tap}'s device (/dev/tap and its ifindex) open as FD, inherited by QEMU"
                   if lay.switch(vm.switch).driver.tap_is_device else ""),
                shlex.join(command),
                f"# {vm.name}'s QEMU, as virtme-run builds it:",
                qemu_argv(virtme),
                f"# {vm.name} once QMP answers: vCPU i -> cpu {list(vm.cpus)}[i % {len(vm.cpus)}] (query-cpus-fast, "
                f"sched_setaffinity); once up: QEMU's other threads, virtiofsd and the vhost worker on cpus "
                f"{format_cpulist(vm.cpus)} (the VM's own)"
                + (f"; memory {vm.policy} over NUMA nodes {format_cpulist(vm.mems)}" if lay.numa_nodes > 1 else "")]
    return out
