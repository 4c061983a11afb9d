"""How the qemu backend shows a topology: ``topology show`` before bring-up, the record's and status' view once up."""

from vnetbench.core.errors import UsageError

from ..thishost import fabric
from ..model import sizing
from ..thishost.host import HostFacts, detect, format_cpulist
from ..model.units import human_size

PINNING = "vCPU threads pinned to the VM's cpus (QMP query-cpus-fast, sched_setaffinity)"


def guest_summary(guest: dict) -> dict:
    """What the record's ``topology.guest`` and each of its ``vms`` say of how the guests run."""
    return {"engine": "qemu", "accel": guest["accel"], "qemu": guest["qemu"], "kernel": guest["kernel"]["version"],
            "kernel_image": guest["kernel"]["image"], "vhost": guest["vhost"], "rootfs": guest["rootfs"]}


def describe_state(st: dict) -> dict:
    """A topology that is up, as the record's ``topology`` field and ``topology status`` show it."""
    lay, seen = st["layout"], st.get("guests") or {}
    summary = guest_summary(st["guest"])
    vms = []
    for vm in lay["vms"]:
        facts = seen.get(vm["name"], {})
        vms.append({"name": vm["name"], "hostname": vm["hostname"], "address": vm["address"], "switch": vm["switch"],
                    "vcpus": vm["vcpus"], "cpus": vm["cpus"], "numa_nodes": vm["mems"], "memory": vm["memory"],
                    "tap": vm["tap"], "mac": vm["mac"], "nic": facts.get("nic"), **summary,
                    "kernel": facts.get("kernel") or summary["kernel"], "hypervisor_flag": facts.get("hypervisor"),
                    "qemu_pid": facts.get("qemu_pid"), "vcpu_threads": facts.get("vcpus")})
    return {
        "id": st["id"], "subnet": lay["subnet"], "head": lay["head"], "guest": summary, "vms": vms,
        "switches": [{"name": sw["name"], "bridge": sw["bridge"], "uplink_rate": sw["rate"],
                      "tbf_burst": sw["burst"], "delay_us": sw["delay"]} for sw in lay["switches"]],
        "enforced_by": enforcement(lay["numa_nodes"]),
    }


def enforcement(numa_nodes: int) -> dict:
    """What holds a guest to its VM's size (as the emulated VMs' cgroups.enforcement says it)."""
    return {"vcpus": PINNING, "memory": "the guest's RAM size" + (" (bound to its NUMA nodes)" if numa_nodes > 1
                                                                   else "")}


def up_lines(topology, st: dict, created: bool) -> list[str]:
    """What ``topology up`` prints (``{took}``: how long it took, filled in by the command)."""
    lay, guest = st["layout"], st["guest"]
    verb = "up in {took}" if created else "was already up"
    lines = [f"{topology.name} {verb}: subnet {lay['subnet']}, head {lay['head']} on {lay['head_bridge']}",
             f"guests: QEMU {guest['qemu']} ({guest['accel']}), kernel {guest['kernel']['version']}, root over "
             f"{guest['rootfs']}, vhost {'on' if guest['vhost'] else 'off'}"]
    for vm in lay["vms"]:
        facts = (st.get("guests") or {}).get(vm["name"], {})
        lines.append(f"{vm['name']}: {vm['hostname']} {vm['address']} on {vm['switch']} ({vm['tap']}, NIC "
                     f"{facts.get('nic')}), {vm['vcpus']} vCPU(s) on cpus {format_cpulist(vm['cpus'])}, "
                     f"{human_size(vm['memory'])}")
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
    shown["guest"] = {"accel": current["guest"]["accel"] if current else topology.guest.accel, "kernel": kernel,
                      "qemu": machine.qemu_version(), "vhost": machine.vhost_net(), "rootfs": machine.root_share()}
    return shown


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
             f"guests: QEMU {guest['qemu']}, accel {accel}, {booted}",
             f"root shared read-only over {guest['rootfs']}, vhost-net {'on' if guest['vhost'] else 'off'}; "
             f"vCPUs held by {enforced['vcpus']}; memory: {enforced['memory']}"]
    if scaled:
        lines.append(f"sizes scaled from a {scaled['from']['cpus']}-cpu, {human_size(scaled['from']['memory'])} "
                     f"host to {scaled['to']['cpus']} cpus, {human_size(scaled['to']['memory'])}")
    return [*lines, "", sizing.vm_table(topology, planned["vms"], scaled), "", fabric.switch_table(topology)]
