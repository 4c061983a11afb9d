"""What an emulated topology is made of, and how mpirun reaches its ranks: pure planning.

``layout()`` turns a Topology into the names, addresses and cpu sets of the objects the netns
backend creates; ``place()`` maps ranks onto VMs; ``launch_spec()`` builds mpirun's arguments.
Nothing here touches the system, so all of it is unit-tested.

Names (Linux interface names have at most 15 characters), with ID the topology's 4 hex digits:
bridges ``vnbIDs<n>``, the physical switch ``vnbIDp``, VM veths ``vnbIDv<n>`` (``eth0``
inside the VM), uplinks ``vnbIDu<n>a`` (switch side) / ``vnbIDu<n>b`` (physical side),
namespaces ``vnb-ID-<vm>``, state and UTS namespaces under ``/run/vnetbench/ID``.
"""

import ipaddress
import sys
from collections import Counter
from dataclasses import asdict, dataclass

from vnetbench.errors import LaunchError, UsageError

from .base import LaunchSpec
from .host import RESERVED, HostFacts
from .intent import VM_IFACE, Intent, tcp_transport
from .binding import binding
from .binding import check_ranks  # noqa: F401 (netns checks --ranks as local does)
from .state import RUN_DIR

PREFIX = "vnb"
SUBNET_POOL = ipaddress.IPv4Network("10.213.0.0/16")

# tbf must pass a whole GSO super-packet (64 KiB) in one go, or it drops or splits it; Mininet's
# 15 KB cuts 1 Gbit/s to a fraction. Two packets, or 2 ms at the rate, whichever is more.
TBF_MIN_BURST = 128 << 10
TBF_BURST_SECONDS = 0.002
TBF_LATENCY = "20ms"

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
class SwitchPlan:
    name: str
    index: int
    bridge: str
    uplink: tuple[str, str] | None = None
    rate: int | None = None
    burst: int | None = None
    delay: int | None = None


@dataclass(frozen=True)
class Layout:
    id: str
    name: str
    subnet: str
    head: str
    head_bridge: str
    physical: str | None
    placement: str
    vms: tuple[VMPlan, ...]
    switches: tuple[SwitchPlan, ...]
    host_cpus: tuple[int, ...]

    @property
    def prefixlen(self) -> int:
        return ipaddress.IPv4Network(self.subnet).prefixlen

    @property
    def bridges(self) -> list[str]:
        return [sw.bridge for sw in self.switches] + ([self.physical] if self.physical else [])

    @property
    def shared_cores(self) -> bool:
        """Do VMs share cpus (more vCPUs than the host has)?"""
        load = Counter(cpu for vm in self.vms for cpu in vm.cpus)
        return any(n > 1 for n in load.values())

    def vm(self, name: str) -> VMPlan:
        return next(vm for vm in self.vms if vm.name == name)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Layout":
        vms = tuple(VMPlan(**{**vm, "cpus": tuple(vm["cpus"]), "mems": tuple(vm["mems"])}) for vm in data["vms"])
        switches = tuple(SwitchPlan(**{**sw, "uplink": tuple(sw["uplink"]) if sw["uplink"] else None})
                         for sw in data["switches"])
        return cls(**{**data, "vms": vms, "switches": switches, "host_cpus": tuple(data["host_cpus"])})


def names(topology_id: str) -> dict:
    p = f"{PREFIX}{topology_id}"
    return {"bridge": f"{p}s", "physical": f"{p}p", "veth": f"{p}v", "uplink": f"{p}u",
            "netns": f"{PREFIX}-{topology_id}-"}


def tbf_burst(rate_bits: int) -> int:
    return max(TBF_MIN_BURST, int(rate_bits / 8 * TBF_BURST_SECONDS))


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


def choose_subnet(topology_id: str, taken, pool: ipaddress.IPv4Network = SUBNET_POOL) -> ipaddress.IPv4Network:
    """A free /24 of ``pool``, starting from one derived from the id so that it is stable."""
    blocks = list(pool.subnets(new_prefix=24)) if pool.prefixlen <= 24 else [pool]
    start = int(topology_id, 16) % len(blocks)
    for k in range(len(blocks)):
        block = blocks[(start + k) % len(blocks)]
        if not any(block.overlaps(net) for net in (*RESERVED, *taken)):
            return block
    raise LaunchError(f"no free /24 left in {pool} for a topology subnet; give one with 'subnet:'")


def layout(topology, host: HostFacts, subnet: ipaddress.IPv4Network) -> Layout:
    tid = topology.id
    n = names(tid)
    addresses = list(subnet.hosts())
    switches = []
    index = {sw.name: i for i, sw in enumerate(topology.switches)}
    for i, sw in enumerate(topology.switches):
        if sw.uplink is None:
            switches.append(SwitchPlan(sw.name, i, f"{n['bridge']}{i}"))
        else:
            switches.append(SwitchPlan(sw.name, i, f"{n['bridge']}{i}", (f"{n['uplink']}{i}a", f"{n['uplink']}{i}b"),
                                       sw.uplink.rate, tbf_burst(sw.uplink.rate), sw.uplink.delay))
    cpus_by_node = usable_by_node(host, topology)
    assigned = assign_cpus(topology.vms, cpus_by_node)
    vms = []
    for i, (vm, (cpus, mems)) in enumerate(zip(topology.vms, assigned)):
        vms.append(VMPlan(
            name=vm.name, index=i, hostname=f"{topology.name}-{vm.name}", netns=f"{n['netns']}{vm.name}",
            uts=str(RUN_DIR / tid / "uts" / vm.name), veth=f"{n['veth']}{i}", address=str(addresses[1 + i]),
            switch=vm.switch, bridge=switches[index[vm.switch]].bridge, cpus=cpus,
            mems=memory_nodes(vm.memory_policy, mems, cpus_by_node), memory=vm.memory, numa=str(vm.numa),
            memory_policy=vm.memory_policy))
    with_vms = {vm.switch for vm in topology.vms}
    uplinked = [sw for sw in switches if sw.uplink]
    physical = n["physical"] if uplinked else None
    # the head (mpirun, on the host) joins the physical switch, like a head node on the cluster's
    # switch; with one switch and no uplink it joins that switch
    lone = [sw for sw in switches if sw.name in with_vms]
    head_bridge = lone[0].bridge if len(lone) == 1 and not lone[0].uplink else physical
    return Layout(id=tid, name=topology.name, subnet=str(subnet), head=str(addresses[0]), head_bridge=head_bridge,
                  physical=physical, placement=topology.placement, vms=tuple(vms), switches=tuple(switches),
                  host_cpus=tuple(sorted(c for cpus in cpus_by_node.values() for c in cpus)))


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


# ---- ranks ------------------------------------------------------------------------------

def rank_counts(ranks: int, vcpus: list[int]) -> list[int]:
    """Ranks per VM, in proportion to vCPUs (largest remainders first, then earlier VMs)."""
    total = sum(vcpus)
    shares = [ranks * v / total for v in vcpus]
    counts = [int(s) for s in shares]
    rest = sorted(range(len(vcpus)), key=lambda i: (-(shares[i] - counts[i]), i))
    for i in rest[:ranks - sum(counts)]:
        counts[i] += 1
    return counts


def place(ranks: int, vcpus: list[int], policy: str) -> list[int]:
    """The VM index of each rank: ``block`` gives consecutive ranks to one VM, ``round-robin``
    deals ranks out one VM at a time (skipping VMs that have their share), as Open MPI's
    ``--map-by slot`` and ``--map-by node`` do on hosts with those slot counts."""
    counts = rank_counts(ranks, vcpus)
    if policy == "block":
        return [i for i, count in enumerate(counts) for _ in range(count)]
    left, order = list(counts), []
    while len(order) < ranks:
        for i in range(len(left)):
            if left[i]:
                order.append(i)
                left[i] -= 1
    return order


def agent_command() -> str:
    """How PRRTE calls the launch agent in place of ssh (it splits this on spaces and ':')."""
    python = sys.executable
    if not python or any(c in python for c in " :\t"):
        raise LaunchError(f"the launch agent needs a Python path without spaces or ':'; got {python!r}")
    return f"{python} -m vnetbench.topologies.agent"


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
