"""How the netns backend shows a topology: ``topology show`` before bring-up, the record's and status' view once up."""

from ..thishost import cgroups, fabric
from ..model import sizing
from ..thishost.host import HostFacts, detect, format_cpulist
from ..model.units import human_size


def describe_state(st: dict) -> dict:
    """A topology that is up, as the record's ``topology`` field and ``topology status`` show it."""
    lay = st["layout"]
    return {
        "id": st["id"], "subnet": lay["subnet"], "head": lay["head"],
        "vms": [{"name": vm["name"], "hostname": vm["hostname"], "address": vm["address"], "switch": vm["switch"],
                 "cpus": vm["cpus"], "numa_nodes": vm["mems"], "memory": vm["memory"]} for vm in lay["vms"]],
        "switches": fabric.describe_switches(lay, st.get("switch_facts")),
        "cgroups": {kind: bool(paths) for kind, paths in st["cgroups"].items()},
        "cgroup_mode": st.get("cgroup_mode", "v1"), "enforced_by": enforcement(st),
    }


def enforcement(st: dict) -> dict:
    return cgroups.enforcement(st.get("cgroup_mode", "v1"), st["cgroups"])  # states from before v2: v1


def up_lines(topology, st: dict, created: bool) -> list[str]:
    """What ``topology up`` prints (``{took}``: how long it took, filled in by the command)."""
    lay = st["layout"]
    verb = "up in {took}" if created else "was already up"
    lines = [f"{topology.name} {verb}: subnet {lay['subnet']}, head {lay['head']} on {lay['head_bridge']}"]
    for vm in lay["vms"]:
        lines.append(f"{vm['name']}: {vm['hostname']} {vm['address']} on {vm['switch']}, cpus "
                     f"{','.join(map(str, vm['cpus']))}")
    enforced = enforcement(st)
    lines.append(f"vCPUs enforced by {enforced['vcpus']}; memory limited by {enforced['memory']}")
    return lines


def preview(topology, host: HostFacts | None = None) -> dict:
    """What ``topology`` is on this host, without bringing it up: its id, the host's cpus, memory and
    NUMA nodes, each VM's cpus and nodes, its subnet (when up or fixed), whether it is up."""
    shown, current = sizing.preview(topology, host or detect())
    shown["enforced_by"] = enforcement(current) if current else cgroups.enforcement(*cgroups.plan({"vm": "vm"}))
    return shown


def show(topology, shown: dict) -> list:
    """``topology show``'s lines and tables for ``preview``'s plan (and the scaling, when scaled)."""
    planned, scaled = shown["plan"], shown.get("scaled")
    host = planned["host"]
    lines = [f"backend {topology.backend}, id {planned['id']}, placement {topology.placement}, "
             f"subnet {planned['subnet'] or 'chosen when it comes up'}" + (" (up)" if planned["up"] else "")]
    nodes = ", ".join(f"node {n}: cpus {format_cpulist(c)}" for n, c in host["numa_nodes"].items())
    lines.append(f"this host: {host['cpus']} cpus, {human_size(host['memory'])}; {nodes}")
    enforced = planned["enforced_by"]
    lines.append(f"vCPUs enforced by {enforced['vcpus']}; memory limited by {enforced['memory']}")
    lines += fabric.kinds_here(topology)
    if scaled:
        lines.append(f"sizes scaled from a {scaled['from']['cpus']}-cpu, {human_size(scaled['from']['memory'])} "
                     f"host to {scaled['to']['cpus']} cpus, {human_size(scaled['to']['memory'])}")
    return [*lines, "", sizing.vm_table(topology, planned["vms"], scaled), "", fabric.switch_table(topology)]
