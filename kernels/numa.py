"""NUMA layout and memory policy: read the node map, apply a policy to this rank, verify it.

Policies: ``local`` (memory on the nodes of the rank's cpus), ``remote`` (on nodes holding none
of its cpus), ``interleave`` (round-robin over every node with memory). They are applied with
set_mempolicy(2) before the kernel allocates, and verified with get_mempolicy(2), and the
record also keeps where the pages of the rank's large mappings really are (/proc/self/numa_maps).
"""

import os
from collections import namedtuple
from pathlib import Path

from vnetbench.core.errors import UsageError
from vnetbench.topologies.thishost.host import NODE_SYSFS, node_cpus

POLICIES = ("local", "remote", "interleave")
SYSFS = NODE_SYSFS

# set_mempolicy, get_mempolicy syscall numbers
_SYSCALLS = {"x86_64": (238, 239), "aarch64": (237, 236), "ppc64le": (261, 260)}
_MPOL = {0: "default", 1: "preferred", 2: "bind", 3: "interleave", 4: "local"}
MPOL_BIND, MPOL_INTERLEAVE = 2, 3


class NodeMap(namedtuple("NodeMap", "nodes")):
    """node id -> its cpus, for the nodes that have memory. A named tuple, not a dataclass (``vnetbench.cli`` says
    why)."""

    __slots__ = ()

    @classmethod
    def read(cls, root: Path = SYSFS) -> "NodeMap":
        nodes = node_cpus(root)
        if not nodes:  # no NUMA support in the kernel: one node with every cpu
            nodes = {0: tuple(sorted(os.sched_getaffinity(0)))}
        return cls(nodes)

    @property
    def single(self) -> bool:
        return len(self.nodes) < 2

    def nodes_of(self, cpus) -> list[int]:
        cpus = set(cpus)
        return sorted(node for node, its in self.nodes.items() if cpus & set(its))

    def target_nodes(self, policy: str, cpus) -> list[int]:
        local = self.nodes_of(cpus) or [min(self.nodes)]
        if policy == "local":
            return local
        if policy == "interleave":
            return sorted(self.nodes)
        remote = [node for node in sorted(self.nodes) if node not in local]
        return remote or local  # single node: nothing is remote (refused unless allowed)

    def describe(self) -> dict:
        return {str(node): list(cpus) for node, cpus in self.nodes.items()}


def check_policy(policy: str | None, allow_single_node: bool, node_map: NodeMap | None = None) -> None:
    """Refuse a policy this machine cannot honour (UsageError names --mem-policy)."""
    if policy is None or policy == "local":
        return
    if policy not in POLICIES:
        raise UsageError(f"--mem-policy: {policy!r} is not allowed; choose from {', '.join(POLICIES)}")
    node_map = node_map or NodeMap.read()
    if node_map.single and not allow_single_node:
        raise UsageError(f"--mem-policy: {policy} needs 2 or more NUMA nodes and this machine has 1; "
                         "add --allow-single-node to run anyway (recorded as single-node)")


# ctypes is imported where it is used: the launcher imports this module for check_policy alone, and ctypes
# (with ctypes.util) is a few milliseconds of every run's start

def _libc():
    import ctypes
    import ctypes.util

    return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def _syscall_numbers():
    machine = os.uname().machine
    if machine not in _SYSCALLS:
        raise OSError(f"memory policy syscalls unknown on {machine}")
    return _SYSCALLS[machine]


def _mask(nodes: list[int]) -> tuple["ctypes.Array", int]:
    import ctypes

    words = max(nodes) // 64 + 1
    mask = (ctypes.c_ulong * words)()
    for node in nodes:
        mask[node // 64] |= 1 << (node % 64)
    return mask, words * 64 + 1


def apply(policy: str, cpus, node_map: NodeMap | None = None) -> dict:
    """Set this process's memory policy; returns what was asked, applied and read back."""
    import ctypes

    node_map = node_map or NodeMap.read()
    nodes = node_map.target_nodes(policy, cpus)
    mode = MPOL_INTERLEAVE if policy == "interleave" else MPOL_BIND
    set_nr, _ = _syscall_numbers()
    mask, maxnode = _mask(nodes)
    libc = _libc()
    if libc.syscall(set_nr, mode, mask, ctypes.c_ulong(maxnode)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"set_mempolicy({_MPOL[mode]}, nodes {nodes}): {os.strerror(err)}")
    return {"requested": policy, "nodes": nodes, "single_node": node_map.single,
            "effective": "local" if node_map.single else policy, "kernel_policy": current()}


def current() -> dict:
    """This thread's memory policy as get_mempolicy(2) reports it."""
    import ctypes

    _, get_nr = _syscall_numbers()
    mode = ctypes.c_int(0)
    mask, maxnode = _mask([1023])
    if _libc().syscall(get_nr, ctypes.byref(mode), mask, ctypes.c_ulong(maxnode), None, ctypes.c_ulong(0)) != 0:
        err = ctypes.get_errno()
        return {"error": os.strerror(err)}
    nodes = [word * 64 + bit for word in range(len(mask)) for bit in range(64) if mask[word] >> bit & 1]
    return {"mode": _MPOL.get(mode.value & 0xFF, str(mode.value)), "nodes": nodes}


def pages_per_node(min_pages: int = 256) -> dict[str, int]:
    """Resident pages per node over this process's larger mappings, from /proc/self/numa_maps."""
    totals: dict[str, int] = {}
    try:
        lines = Path("/proc/self/numa_maps").read_text().splitlines()
    except OSError:
        return totals
    for line in lines:
        counts = {}
        for field in line.split()[2:]:
            key, _, value = field.partition("=")
            if key.startswith("N") and key[1:].isdigit() and value.isdigit():
                counts[key[1:]] = int(value)
        if sum(counts.values()) >= min_pages:
            for node, pages in counts.items():
                totals[node] = totals.get(node, 0) + pages
    return totals
