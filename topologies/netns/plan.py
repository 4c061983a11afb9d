"""What an emulated topology is made of, and how mpirun reaches its ranks: pure planning.

``layout()`` turns a Topology into the names, addresses and cpu sets of what the backend creates: the
switch fabric (``fabric.plan``: bridges, uplinks, the head) and each VM's namespace, UTS namespace, veth
and cpus; ``place()`` maps ranks onto VMs; ``launch_spec()`` says how mpirun starts them. Nothing here
touches the system, so all of it is unit-tested.

Names, with ID the topology's 4 hex digits (the fabric's own: fabric.py): VM veths ``vnbIDv<n>``
(``eth0`` inside the VM), namespaces ``vnb-ID-<vm>``, state and UTS namespaces under ``/run/vnetbench/ID``.
"""

import ipaddress
import sys
from collections import Counter
from dataclasses import dataclass
from typing import ClassVar

from vnetbench.core.errors import LaunchError, UsageError

from ..thishost import fabric
from ..base import LaunchSpec
from ..launch.binding import binding
from ..launch.binding import check_ranks  # noqa: F401 (netns checks --ranks as local does)
from ..thishost.fabric import HostLayout
from ..thishost.host import HostFacts
from ..launch.intent import VM_IFACE, Intent, tcp_transport
from ..launch.ranks import place, rank_counts  # noqa: F401 (rank_counts: tests call it by this module)
from ..model.sizing import assign_cpus, memory_nodes, usable_by_node
from ..thishost.state import RUN_DIR

# the measured reason mpi_yield_when_idle is set (DESIGN.md)
YIELD_WHY = ("busy-polling ranks would starve the kernel's bridge forwarding "
             "(8-byte latency measured 4000 us without yielding, 13 us with)")


@dataclass(frozen=True)
class VMPlan:
    name: str
    index: int
    hostname: str
    netns: str
    uts: str
    veth: str
    address: str
    switch: str
    bridge: str
    cpus: tuple[int, ...]
    mems: tuple[int, ...]
    memory: int
    numa: str
    memory_policy: str | None = None


@dataclass(frozen=True)
class Layout(HostLayout):
    VM: ClassVar[type] = VMPlan
    vms: tuple[VMPlan, ...]

    @property
    def shared_cores(self) -> bool:
        """Do VMs share cpus (more vCPUs than the host has)?"""
        load = Counter(cpu for vm in self.vms for cpu in vm.cpus)
        return any(n > 1 for n in load.values())


def layout(topology, host: HostFacts, subnet: ipaddress.IPv4Network) -> Layout:
    tid = topology.id
    fab = fabric.plan(topology, subnet)
    link, netns = f"{fabric.names(tid)['vm_link']}v", f"{fabric.PREFIX}-{tid}-"
    cpus_by_node = usable_by_node(host, topology)
    assigned = assign_cpus(topology.vms, cpus_by_node)
    vms = []
    for i, (vm, (cpus, mems)) in enumerate(zip(topology.vms, assigned)):
        vms.append(VMPlan(
            name=vm.name, index=i, hostname=f"{topology.name}-{vm.name}", netns=f"{netns}{vm.name}",
            uts=str(RUN_DIR / tid / "uts" / vm.name), veth=f"{link}{i}", address=fabric.vm_address(subnet, i),
            switch=vm.switch, bridge=fab.bridge_of(vm.switch), cpus=cpus,
            mems=memory_nodes(vm.memory_policy, mems, cpus_by_node), memory=vm.memory, numa=str(vm.numa),
            memory_policy=vm.memory_policy))
    return Layout(id=tid, name=topology.name, subnet=fab.subnet, head=fab.head, head_bridge=fab.head_bridge,
                  physical=fab.physical, placement=topology.placement, vms=tuple(vms), switches=fab.switches,
                  host_cpus=tuple(sorted(c for cpus in cpus_by_node.values() for c in cpus)))


# ---- ranks ------------------------------------------------------------------------------

def agent_command() -> str:
    """How PRRTE calls the launch agent in place of ssh (it splits this on spaces and ':')."""
    python = sys.executable
    if not python or any(c in python for c in " :\t"):
        raise LaunchError(f"the launch agent needs a Python path without spaces or ':'; got {python!r}")
    return f"{python} -m {__package__}.agent"


def launch_spec(lay: Layout, ranks: int, bind: str | None = None, *, enforced: dict | None = None,
                netns_inodes: dict | None = None,
                agent: str | None = None) -> LaunchSpec:
    """mpirun arguments that start ``ranks`` ranks in the VMs of ``lay``, and what to check.

    Each VM is one host to Open MPI (slots = its share of the ranks); ssh is replaced by the
    launch agent, which starts the daemon inside the VM; TCP and out-of-band traffic stay on the
    topology's subnet; ranks in one VM may use shared memory, as inside a real VM.
    """
    check_ranks(ranks)
    order = place(ranks, [len(vm.cpus) for vm in lay.vms], lay.placement)
    counts = Counter(order)
    used = [vm for vm in lay.vms if counts[vm.index]]
    busiest = max(used, key=lambda vm: (counts[vm.index] / len(vm.cpus), -vm.index))
    if bind not in (None, "none"):
        # mpirun plans bindings from its own view of the cpus, which is not the VM's cpuset
        raise UsageError(f"--bind: {bind!r} is not available on emulated VMs: ranks run on their VM's vCPUs "
                         f"and the VM's scheduler places them, as in a guest; use --bind none")
    mca, notes = binding(counts[busiest.index], len(busiest.cpus), "none")
    notes = {**notes, "cores": len(lay.host_cpus)}
    shared = len({cpu for vm in used for cpu in vm.cpus}) < sum(len(vm.cpus) for vm in used)
    if len(used) > 1 and (shared or ranks >= len(lay.host_cpus)):
        mca["mpi_yield_when_idle"] = "1"
        why = "VMs share cores, " if shared else ""
        notes["yield_when_idle"] = (f"{ranks} ranks in {len(used)} VMs on {len(lay.host_cpus)} cpus: {why}"
                                    f"{YIELD_WHY}")
    notes.update({
        "placement": lay.placement,
        "ranks_per_vm": {vm.name: counts[vm.index] for vm in used},
        "vms_share_cores": shared,
        # what confines the VMs (cgroups.enforcement): "cgroup v2 cpuset", "cpu affinity", ...
        "vcpus_enforced_by": (enforced or {}).get("vcpus", "cpu affinity"),
        "memory_limited_by": (enforced or {}).get("memory", "none"),
    })
    mpi_mca = {**tcp_transport(lay.subnet), **mca}
    # not --leave-session-attached: with it, mpirun hung after its job in about 1 run in 5 here.
    # Daemons detach from mpirun's session instead; they end with mpirun (lost lifeline), and
    # a teardown ends every process inside the VMs.
    intent = Intent(ranks=ranks, hosts=[(vm.hostname, counts[vm.index]) for vm in used],
                    map_by="slot" if lay.placement == "block" else "node", bind="none",
                    agent=agent or agent_command(), prte={"plm_ssh_no_tree_spawn": "1"}, subnet=lay.subnet,
                    iface=VM_IFACE, mca=mpi_mca)
    inodes = netns_inodes or {}
    expected, labels = [], []
    for rank, i in enumerate(order):
        vm = lay.vms[i]
        want = {"hostname": vm.hostname, "address": vm.address, "cpus": list(vm.cpus)}
        if vm.name in inodes:
            want["netns"] = inodes[vm.name]
        expected.append(want)
        labels.append({"vm": vm.name, "switch": vm.switch, "address": vm.address, "vm_cpus": list(vm.cpus),
                       "numa_nodes": list(vm.mems)})
        if vm.memory_policy:
            labels[-1]["memory_policy"] = vm.memory_policy
    return LaunchSpec(intent=intent, expected_placement=expected, placement_labels=labels, notes=notes)
