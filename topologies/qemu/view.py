"""How the qemu backend shows a topology: ``topology show`` before bring-up, the record's and status' view once up."""

from vnetbench.core.errors import UsageError

from ..thishost import fabric
from ..model import sizing
from ..thishost.host import HostFacts, detect, format_cpulist
from ..model.units import human_size

PINNING = "vCPU threads pinned to the VM's cpus (QMP query-cpus-fast, sched_setaffinity)"


def guest_summary(guest: dict) -> dict:
    """What the record's ``topology.guest`` and each of its ``vms`` say of how the guests run."""
    return {"engine": "qemu", "accel": guest["accel"], "machine": guest.get("machine"), "qemu": guest["qemu"],
            "kernel": guest["kernel"]["version"], "kernel_image": guest["kernel"]["image"],
            "vhost_asked": guest["vhost"], "vhost_why": guest.get("vhost_why"), "rootfs": guest["rootfs"],
            "memory_backing": guest.get("memory_backing"), "probe": guest.get("probe")}


def describe_state(st: dict) -> dict:
    """A topology that is up, as the record's ``topology`` field and ``topology status`` show it."""
    lay, seen = st["layout"], st.get("guests") or {}
    summary = guest_summary(st["guest"])
    # what each guest uses, read from it once up (seen.py); the topology's: theirs when they agree
    used = sorted({seen[vm["name"]]["vhost"] for vm in lay["vms"] if seen.get(vm["name"], {}).get("vhost")})
    summary["vhost"] = (used[0] if len(used) == 1 else used) if used else None
    vms = []
    for vm in lay["vms"]:
        facts = seen.get(vm["name"], {})
        vms.append({"name": vm["name"], "hostname": vm["hostname"], "address": vm["address"], "switch": vm["switch"],
                    "vcpus": vm["vcpus"], "cpus": vm["cpus"], "numa_nodes": vm["mems"], "memory": vm["memory"],
                    "tap": vm["tap"], "mac": vm["mac"], "nic": facts.get("nic"), **summary,
                    "kernel": facts.get("kernel") or summary["kernel"], "hypervisor_flag": facts.get("hypervisor"),
                    "qemu_pid": facts.get("qemu_pid"), "vcpu_threads": facts.get("vcpus"),
                    "vhost": facts.get("vhost"), "threads": facts.get("threads"), "memory_policy": vm.get("policy"),
                    "memory_seen": facts.get("memory")})
    return {
        "id": st["id"], "subnet": lay["subnet"], "head": lay["head"], "guest": summary, "vms": vms,
        "switches": fabric.describe_switches(lay, st.get("switch_facts")),
        "enforced_by": enforcement(lay["numa_nodes"]),
    }


def enforcement(numa_nodes: int) -> dict:
    """What holds a guest to its VM's size (as the emulated VMs' cgroups.enforcement says it)."""
    from .seen import EMULATOR_CPUS

    return {"vcpus": PINNING, "emulator_threads": f"QEMU's other threads, virtiofsd and the vhost worker on "
                                                  f"{EMULATOR_CPUS}",
            "memory": "the guest's RAM size" + (" (held to its NUMA nodes under its memory policy: numactl "
                                                "--membind or --interleave)" if numa_nodes > 1 else "")}


def up_lines(topology, st: dict, created: bool) -> list[str]:
    """What ``topology up`` prints (``{took}``: how long it took, filled in by the command)."""
    lay, guest = st["layout"], st["guest"]
    verb = "up in {took}" if created else "was already up"
    lines = [f"{topology.name} {verb}: subnet {lay['subnet']}, head {lay['head']} on {lay['head_bridge']}",
             f"guests: QEMU {guest['qemu']} ({guest['accel']}, machine {guest.get('machine', '?')}), kernel "
             f"{guest['kernel']['version']}, root over {guest['rootfs']}, vhost {'asked' if guest['vhost'] else 'off'}"]
    for vm in lay["vms"]:
        facts = (st.get("guests") or {}).get(vm["name"], {})
        memory = facts.get("memory") or {}
        lines.append(f"{vm['name']}: {vm['hostname']} {vm['address']} on {vm['switch']} ({vm['tap']}, NIC "
                     f"{facts.get('nic')}, {facts.get('vhost', 'vhost ?')}), {vm['vcpus']} vCPU(s) on cpus "
                     f"{format_cpulist(vm['cpus'])}, {human_size(vm['memory'])} ({memory.get('backing', '?')} memory, "
                     f"{memory.get('policy', '?')}, MiB by node {memory.get('mib_by_node', '?')})")
    if guest["accel"] == "tcg":
        lines.append("TCG: an emulated CPU; for behaviour, not for timings")
    return lines


def preview(topology, host: HostFacts | None = None) -> dict:
    """What ``topology`` is on this host without bringing it up: the host, each VM's cpus and nodes, how the
    guests would boot (or why they cannot), its subnet, whether it is up."""
    from . import machine

    host = host or detect()
    shown, current = sizing.preview(topology, host)
    try:
        kernel = machine.kernel(topology.guest.kernel)
    except UsageError as exc:
        kernel = {"problem": str(exc)}
    shown["numa"] = len(host.cpus_by_node)
    # what is known without a probe guest: auto's choice is made at bring-up
    rootfs = machine.root_share()
    shown["guest"] = {"accel": current["guest"]["accel"] if current else topology.guest.accel, "kernel": kernel,
                      "machine": machine.MACHINE, "machine_type": machine.machine_type(),
                      "qemu": machine.qemu_version(),
                      "vhost": machine.vhost_net(), "rootfs": rootfs, "memory_backing": machine.backing(rootfs)}
    return shown


def _machine(guest: dict) -> str:
    found = guest.get("machine_type")
    return f"{found['name']}, up to {found['max_cpus']} vCPUs" if found else guest["machine"]


def show(topology, shown: dict) -> list:
    """``topology show``'s lines and tables for ``preview``'s plan: the host, what holds the guests to their VMs'
    sizes, how they boot, then the VMs and switches as every topology of this host's VMs shows them."""
    planned, scaled = shown["plan"], shown.get("scaled")
    host, guest, kernel = planned["host"], planned["guest"], planned["guest"]["kernel"]
    nodes = ", ".join(f"node {n}: cpus {format_cpulist(c)}" for n, c in host["numa_nodes"].items())
    enforced = enforcement(planned["numa"])
    booted = f"kernel {kernel['image']} ({kernel['version']}, {kernel['chosen_by']})" if "image" in kernel \
        else kernel["problem"]
    accel = guest["accel"] + (" (KVM when a probe guest boots with it, else refused)" if guest["accel"] == "auto"
                              else "")
    lines = [f"backend qemu, id {planned['id']}, placement {topology.placement}, "
             f"subnet {planned['subnet'] or 'chosen when it comes up'}" + (" (up)" if planned["up"] else ""),
             f"this host: {host['cpus']} cpus, {human_size(host['memory'])}; {nodes}",
             f"guests: QEMU {guest['qemu']} (machine {_machine(guest)}), accel {accel}, {booted}",
             f"root shared read-only over {guest['rootfs']} ({guest['memory_backing']['kind']} memory, pages of "
             f"{guest['memory_backing']['page_size']}, {guest['memory_backing']['thp']}), vhost-net "
             f"{'asked' if guest['vhost'] else 'off'}; vCPUs held by {enforced['vcpus']}; "
             f"{enforced['emulator_threads']}; memory: {enforced['memory']}", *fabric.kinds_here(topology)]
    if scaled:
        lines.append(f"sizes scaled from a {scaled['from']['cpus']}-cpu, {human_size(scaled['from']['memory'])} "
                     f"host to {scaled['to']['cpus']} cpus, {human_size(scaled['to']['memory'])}")
    return [*lines, "", sizing.vm_table(topology, planned["vms"], scaled), "", fabric.switch_table(topology)]
