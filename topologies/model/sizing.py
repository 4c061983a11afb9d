"""Fitting a VM topology onto this host: sizes scaled from ``scale_from``, checked against the host, and each VM's cpus.

Shared by the backends whose VMs run on this one host (netns; the coming qemu), at load time (``fit``:
scaled, then every size, NUMA node and the subnet checked, each problem located in the spec) and at
bring-up (``assign_cpus``: which host cpus and NUMA nodes each VM gets). Pure: the host is a HostFacts.
"""

import math

from vnetbench.core.errors import SpecError

from . import spec, units
from vnetbench.topologies.thishost.host import HostFacts, format_cpulist
from .validation import Lines, report


def fit(data, source: str, lines=None, host: HostFacts | None = None, checks=()) -> "spec.Topology":
    """``data`` as a VM topology on ``host`` (default: this one): the spec model and the checks that hold for
    any VM topology, then ``checks`` (the backend's own: topology -> problems), then the sizes scaled and
    checked against the host. SpecError listing every problem, each located."""
    topology = spec.model(data, source, lines)
    problems = spec.check_references(topology) + spec.check_vms(topology)
    for check in checks:
        problems += check(topology)
    if not problems:
        from vnetbench.topologies.thishost.host import detect

        host = host or detect()
        topology = scale(topology, host)
        problems = check_host(topology, host)
    if problems:
        raise SpecError(report(source, lines or Lines(None), problems))
    return topology


def host_size(t, host: HostFacts) -> tuple[int, int]:
    """(cpus, memory) the topology may use: what its ``hosts[0]`` declares, at most what the host has."""
    declared = t.hosts[0] if t.hosts else None
    cpus = declared.cpus if declared and declared.cpus else len(host.cpus)
    memory = declared.memory if declared and declared.memory else host.memory
    return min(cpus, len(host.cpus)), min(memory, host.memory)


def scale(t, host: HostFacts):
    """Sizes written for ``scale_from`` -> sizes for this host, at least 1 vCPU and 64 MiB each."""
    if t.scale_from is None:
        return t
    cpus, memory = host_size(t, host)
    ref = t.scale_from
    vms, asked = [], {}
    for vm in t.vms:
        vcpus = max(1, min(cpus, math.floor(vm.vcpus * cpus / ref.cpus + 0.5)))
        mem = max(units.MIN_MEMORY, (vm.memory * memory // ref.memory) >> 20 << 20)
        asked[vm.name] = [vm.vcpus, vm.memory]
        vms.append(vm.model_copy(update={"vcpus": vcpus, "memory": mem}))
    scaled = t.model_copy(update={"vms": vms})
    scaled._scaled = {"from": {"cpus": ref.cpus, "memory": ref.memory},
                      "to": {"cpus": cpus, "memory": memory}, "vms": asked}
    return scaled


def check_host(t, host: HostFacts) -> list[tuple[tuple, str]]:
    """Problems of a topology's VMs on ``host``: sizes, NUMA nodes, subnet clashes."""
    problems = []
    cpus, memory = host_size(t, host)
    if t.hosts and t.hosts[0].cpus is not None and t.hosts[0].cpus > len(host.cpus):
        problems.append((("hosts", 0, "cpus"), f"{t.hosts[0].cpus} cpus declared; this host has {len(host.cpus)}"))
    if t.hosts and t.hosts[0].memory is not None and t.hosts[0].memory > host.memory:
        problems.append((("hosts", 0, "memory"), f"{units.human_size(t.hosts[0].memory)} declared; this host "
                                                 f"has {units.human_size(host.memory)}"))
    largest = max(len(c) for c in host.cpus_by_node.values())
    hint = "" if t.scale_from else " (or add scale_from to scale sizes to the host)"
    for i, vm in enumerate(t.vms):
        if vm.vcpus > cpus:
            problems.append((("vms", i, "vcpus"), f"{vm.vcpus} vCPUs on a host with {cpus} cpus; "
                                                  f"allowed: at most {cpus}{hint}"))
        elif vm.numa == "packed" and vm.vcpus > largest:
            problems.append((("vms", i, "numa"), f"packed needs {vm.vcpus} cpus on one NUMA node; the largest "
                                                 f"has {largest}; use spread or a node number"))
        if vm.memory > memory:
            problems.append((("vms", i, "memory"), f"{units.human_size(vm.memory)} on a host with "
                                                   f"{units.human_size(memory)}{hint}"))
        if isinstance(vm.numa, int):
            node = host.cpus_by_node.get(vm.numa)
            if node is None:
                nodes = ", ".join(f"{n} (cpus {format_cpulist(c)})" for n, c in sorted(host.cpus_by_node.items()))
                problems.append((("vms", i, "numa"), f"no NUMA node {vm.numa} on this host; nodes: {nodes}"))
            elif vm.vcpus > len(node):
                problems.append((("vms", i, "numa"), f"node {vm.numa} has {len(node)} cpus for {vm.vcpus} vCPUs"))
    if t.subnet is not None:
        clash = host.overlaps(t.subnet)
        if clash:
            problems.append((("subnet",), f"{t.subnet} overlaps {clash}; choose another subnet, or leave "
                                          f"subnet out and vnetbench picks a free one"))
    return problems


# ---- which cpus each VM gets --------------------------------------------------------------

def usable_by_node(host: HostFacts, topology) -> dict[int, tuple[int, ...]]:
    """The host's cpus by NUMA node, cut to the count a spec's ``hosts[0].cpus`` declares."""
    cpus_by_node = host.cpus_by_node
    declared = topology.hosts[0].cpus if topology.hosts and topology.hosts[0].cpus else None
    if declared is None:
        return dict(cpus_by_node)
    kept, left = {}, declared
    for node in sorted(cpus_by_node):
        take = cpus_by_node[node][:left]
        if take:
            kept[node] = take
        left -= len(take)
    return kept


def assign_cpus(vms, cpus_by_node: dict[int, tuple[int, ...]]) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(cpus, NUMA nodes) for each VM: its vCPUs on the least-loaded cpus its policy allows.

    ``packed`` puts a VM on the node with the most idle cpus, a number on that node, ``spread``
    takes cpus from every node in turn. When vCPUs outnumber cpus, VMs share cpus evenly, as
    VMs on a consolidated host share cores.
    """
    load = {cpu: 0 for cpus in cpus_by_node.values() for cpu in cpus}
    result = []
    for vm in vms:
        if vm.numa == "spread":
            nodes = sorted(cpus_by_node)
            queues = {n: sorted(cpus_by_node[n], key=lambda c: (load[c], c)) for n in nodes}
            chosen = []
            while len(chosen) < vm.vcpus:
                for n in nodes:
                    if queues[n] and len(chosen) < vm.vcpus:
                        chosen.append(queues[n].pop(0))
                if not any(queues.values()):
                    break
            used = tuple(sorted({n for n in nodes if any(c in cpus_by_node[n] for c in chosen)}))
        else:
            node = _emptiest(cpus_by_node, load) if vm.numa == "packed" else vm.numa
            chosen = sorted(cpus_by_node[node], key=lambda c: (load[c], c))[:vm.vcpus]
            used = (node,)
        for cpu in chosen:
            load[cpu] += 1
        result.append((tuple(sorted(chosen)), used))
    return result


def _emptiest(cpus_by_node, load) -> int:
    """The node whose least-loaded cpus are least loaded, and most numerous; then the lowest."""
    def score(node):
        cpus = cpus_by_node[node]
        least = min(load[c] for c in cpus)
        return least, -sum(load[c] == least for c in cpus), node
    return min(cpus_by_node, key=score)


def memory_nodes(policy: str | None, local: tuple[int, ...], cpus_by_node) -> tuple[int, ...]:
    """The NUMA nodes a VM's memory may come from (its cpuset's mems) under its memory policy."""
    if policy == "interleave":
        return tuple(sorted(cpus_by_node))
    if policy == "remote":
        return tuple(sorted(node for node in cpus_by_node if node not in local)) or local
    return local


def vm_table(topology, planned: list[dict], scaled: dict | None) -> tuple[list[str], list[list]]:
    """``topology show``'s table of a topology's VMs on this host: sizes (and what was asked, when scaled), the
    cpus and NUMA nodes ``planned`` gives each (assign_cpus), switch and hostname."""
    rows = []
    for vm, where in zip(topology.vms, planned):
        asked = scaled["vms"].get(vm.name) if scaled else None
        vcpus = f"{vm.vcpus}" + (f" (of {asked[0]})" if asked else "")
        memory = units.human_size(vm.memory) + (f" (of {units.human_size(asked[1])})" if asked else "")
        rows.append([vm.name, vcpus, memory, vm.numa, format_cpulist(where["cpus"]),
                     format_cpulist(where["numa_nodes"]), vm.switch, f"{topology.name}-{vm.name}"])
    return ["VM", "VCPUS", "MEMORY", "NUMA", "CPUS", "NODES", "SWITCH", "HOSTNAME"], rows


def preview(topology, host: HostFacts) -> tuple[dict, dict | None]:
    """What a topology whose VMs live on ``host`` is there, without bringing it up (the part every such backend
    shows): its id, the host's cpus, memory and NUMA nodes, each VM's cpus and nodes, its subnet (when up or
    fixed), whether it is up; and its state, when it is."""
    from vnetbench.topologies.thishost import state

    current = state.read(topology.id)
    assigned = assign_cpus(topology.vms, usable_by_node(host, topology))
    return {
        "id": topology.id,
        "host": {"cpus": len(host.cpus), "memory": host.memory,
                 "numa_nodes": {str(n): list(c) for n, c in host.cpus_by_node.items()}},
        "vms": [{"name": vm.name, "cpus": list(cpus), "numa_nodes": list(mems)}
                for vm, (cpus, mems) in zip(topology.vms, assigned)],
        "subnet": current["layout"]["subnet"] if current else (str(topology.subnet) if topology.subnet else None),
        "up": current is not None,
    }, current


def one_host(why: str):
    """A ``fit`` check for a backend whose VMs all run on this one host: at most one host declared (``why``)."""
    def check(topology) -> list[tuple[tuple, str]]:
        return [(("hosts",), f"{why}; declare at most one host")] if len(topology.hosts) > 1 else []
    return check
