"""What a qemu topology is made of, and how mpirun reaches its ranks: pure planning.

``layout()`` turns a qemu topology into the names, addresses and files of what the backend makes: the switch
fabric (fabric.py: bridges, shaped uplinks, the head), and per VM a tap on its switch's bridge, a MAC and an
address, the host cpus its vCPU threads are pinned to and the NUMA nodes its memory is held to (sizing.py, as
for emulated VMs), and its files in the topology's state directory (QMP socket, console log, pid file).
``launch_spec()`` places ranks on the VMs as the emulated VMs' ranks are placed (ranks.py) and starts them
the way the hosts backend starts ranks on hosts: over SSH (sshlaunch.py), to the sshd in each guest.

Names, with ID the topology's 4 hex digits: taps ``vnbIDt<n>`` (state.ANY_LINK), MACs ``02:76:ID:00:<n>``
(locally administered), files under ``/run/vnetbench/ID``.
"""

import ipaddress
from dataclasses import dataclass
from typing import ClassVar

from ..thishost import fabric, state
from ..base import LaunchSpec
from ..thishost.fabric import HostLayout
from ..thishost.host import HostFacts
from ..launch.ranks import place
from ..model.sizing import assign_cpus, memory_nodes, usable_by_node
from ..launch.sshlaunch import SshHost, ssh_launch

SSH_PORT = 2222  # the guests' own sshd (the host's /usr/sbin/sshd, started in each guest)
TAP = "t"  # a tap's letter among the VM links (state.ANY_LINK)


@dataclass(frozen=True)
class GuestPlan:
    name: str
    index: int
    hostname: str
    tap: str
    mac: str
    address: str
    switch: str
    bridge: str
    vcpus: int
    cpus: tuple[int, ...]
    mems: tuple[int, ...]
    memory: int
    numa: str
    policy: str = "bind"  # how QEMU's memory is held to ``mems`` where the host has several nodes: bind, interleave


@dataclass(frozen=True)
class Layout(HostLayout):
    VM: ClassVar[type] = GuestPlan
    vms: tuple[GuestPlan, ...]
    numa_nodes: int  # the host's: guests' memory is bound to theirs only where there is more than one


def mac(topology_id: str, index: int) -> str:
    return f"02:76:{topology_id[:2]}:{topology_id[2:]}:{index >> 8:02x}:{index & 0xff:02x}"


def layout(topology, host: HostFacts, subnet: ipaddress.IPv4Network) -> Layout:
    tid = topology.id
    fab = fabric.plan(topology, subnet)
    cpus_by_node = usable_by_node(host, topology)
    assigned = assign_cpus(topology.vms, cpus_by_node)
    vms = []
    for i, (vm, (cpus, mems)) in enumerate(zip(topology.vms, assigned)):
        vms.append(GuestPlan(
            name=vm.name, index=i, hostname=f"{topology.name}-{vm.name}", tap=f"{fabric.names(tid)['vm_link']}{TAP}{i}",
            mac=mac(tid, i), address=fabric.vm_address(subnet, i), switch=vm.switch, bridge=fab.bridge_of(vm.switch),
            vcpus=vm.vcpus, cpus=cpus, mems=memory_nodes(vm.memory_policy, mems, cpus_by_node), memory=vm.memory,
            numa=str(vm.numa), policy="interleave" if vm.memory_policy == "interleave" else "bind"))
    return Layout(id=tid, name=topology.name, subnet=fab.subnet, head=fab.head, head_bridge=fab.head_bridge,
                  physical=fab.physical, placement=topology.placement, vms=tuple(vms), switches=fab.switches,
                  host_cpus=tuple(sorted(c for cpus in cpus_by_node.values() for c in cpus)),
                  numa_nodes=len(host.cpus_by_node))


def numactl(lay: Layout, vm: GuestPlan) -> list[str]:
    """What starts a guest with its memory under its VM's policy (QEMU inherits it and allocates the guest's RAM
    under it), where the host has several NUMA nodes: spread page by page over them (``interleave``), or held to
    them (``--membind``: local, remote)."""
    if lay.numa_nodes <= 1:
        return []
    return ["numactl", f"--{'interleave' if vm.policy == 'interleave' else 'membind'}={','.join(map(str, vm.mems))}"]


def node_demand(lay: Layout) -> dict[int, list[tuple[str, int]]]:
    """NUMA node -> (VM, bytes of its memory that node is to hold): an interleaved VM's memory split evenly over its
    nodes, a bound VM's too where it is bound to several (the kernel fills them in its own order: an even share is
    the least each may be asked for)."""
    demand: dict[int, list[tuple[str, int]]] = {}
    for vm in lay.vms:
        for node in vm.mems:
            demand.setdefault(node, []).append((vm.name, vm.memory // len(vm.mems)))
    return demand


def capacity_problems(lay: Layout, memory_by_node: dict[int, int] | None) -> list[str]:
    """Each NUMA node whose guests' memory is more than the node has (the guests' RAM is held to their nodes
    and touched lazily: past a node's memory the kernel kills a guest mid-run), naming the shortfall."""
    from ..model.units import human_size

    if lay.numa_nodes <= 1 or not memory_by_node:
        return []
    problems = []
    for node, held in sorted(node_demand(lay).items()):
        need, has = sum(size for _, size in held), memory_by_node.get(node, 0)
        if need > has:
            shares = ", ".join(f"{name} {human_size(size)}" for name, size in held)
            problems.append(f"NUMA node {node}: its guests' memory is {human_size(need)} ({shares}), "
                            f"{human_size(need - has)} more than its {human_size(has)}")
    return problems


def files(topology_id: str, vm: str) -> dict[str, str]:
    """A guest's files on the host, in its topology's state directory."""
    folder = state.directory(topology_id)
    return {"qmp": str(folder / f"{vm}.qmp"), "console": str(folder / f"{vm}.console"),
            "pidfile": str(folder / f"{vm}.pid"), "tmp": str(folder / f"tmp-{vm}")}


def tap_lines(lay: Layout) -> list[str]:
    """ip lines that make each VM's tap and put it on its switch (its kind's driver says how: fabric.link_lines)."""
    return fabric.link_lines(lay.fabric, [(vm.switch, vm.tap, None, vm.mac) for vm in lay.vms])


# ---- ranks ------------------------------------------------------------------------------

def launch_spec(lay: Layout, ranks: int, bind: str | None, *, ssh_args: list[str], guests: dict,
                hostfile) -> LaunchSpec:
    """How mpirun starts ``ranks`` ranks in the guests of ``lay``: placed on the VMs as emulated VMs' ranks are
    (ranks.py: in proportion to vCPUs, block or round-robin), started over SSH as on hosts
    (sshlaunch.py), each rank bound to a vCPU of
    its guest while they fit; ``guests`` are what each guest said when it came up (its NIC, its kernel)."""
    order = place(ranks, [vm.vcpus for vm in lay.vms], lay.placement)
    hosts = [SshHost(vm.hostname, vm.address, vm.switch, vm.vcpus) for vm in lay.vms]
    spec = ssh_launch(hosts, order, placement=lay.placement, subnet=lay.subnet, ssh_args=ssh_args, bind=bind,
                      hostfile=hostfile)
    for rank, i in enumerate(order):
        vm = lay.vms[i]
        seen = guests.get(vm.name, {})
        spec.expected_placement[rank]["hostname"] = vm.hostname
        spec.placement_labels[rank] = {"vm": vm.name, "host": vm.hostname, "switch": vm.switch, "address": vm.address,
                                       "nic": seen.get("nic"), "mac": vm.mac, "vcpus": vm.vcpus,
                                       "vm_cpus": list(vm.cpus), "numa_nodes": list(vm.mems)}
    # ranks of one guest share memory in the guest's own /dev/shm, which goes with the guest; the job directory
    # vnetbench gives them (jobs.SEGMENT_DIRS, which mpirun forwards) is the host's, absent in a guest.
    # On the command line, it wins over the environment
    spec.intent.mca["btl_sm_backing_directory"] = "/dev/shm"
    spec.notes["ranks_per_vm"] = spec.notes.pop("ranks_per_host")
    spec.notes["vms"] = spec.notes.pop("hosts")
    return spec
