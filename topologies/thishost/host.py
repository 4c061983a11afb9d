"""What this machine offers a topology: usable cpus per NUMA node, memory, and the IPv4
networks already in use (addresses and routes), read without changing anything."""

import ipaddress
import json
import os
import shutil
import subprocess
from collections import namedtuple
from pathlib import Path

# never usable for an emulated subnet, whatever the routing table says
RESERVED = tuple(ipaddress.IPv4Network(net) for net in (
    "0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "224.0.0.0/4", "240.0.0.0/4"))

NODE_SYSFS = Path("/sys/devices/system/node")

# vnetbench's own interfaces; what they route is checked against vnetbench's state instead
OWN_PREFIX = "vnb"


class HostFacts(namedtuple("HostFacts", "cpus_by_node memory networks networks_known name memory_by_node",
                           defaults=((), True, "localhost", None))):
    """A host's cpus by NUMA node, its memory in bytes, and ``networks``: (what it is, network) for each IPv4
    address and route of the host, default routes excepted; ``memory_by_node``: NUMA node -> its memory in bytes
    (node_memory; None: not known). A named tuple, not a dataclass (``vnetbench.cli``
    says why)."""

    __slots__ = ()

    @property
    def cpus(self) -> list[int]:
        return sorted(cpu for cpus in self.cpus_by_node.values() for cpu in cpus)

    def overlaps(self, subnet: ipaddress.IPv4Network) -> str | None:
        """What ``subnet`` would clash with on this host, or None."""
        for net in RESERVED:
            if subnet.overlaps(net):
                return f"the reserved range {net}"
        for what, net in self.networks:
            if subnet.overlaps(net):
                return what
        return None


def usable_cpus() -> int:
    """How many cpus this process may run on (its affinity, which a cpuset or taskset narrows)."""
    return len(os.sched_getaffinity(0))


def parse_cpulist(text: str) -> list[int]:
    """'0-3,8,10-11' -> [0, 1, 2, 3, 8, 10, 11]"""
    cpus = []
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        cpus.extend(range(int(low), int(high or low) + 1))
    return cpus


def format_cpulist(cpus) -> str:
    cpus = sorted(set(cpus))
    parts, start = [], None
    for i, cpu in enumerate(cpus):
        if start is None:
            start = cpu
        if i + 1 == len(cpus) or cpus[i + 1] != cpu + 1:
            parts.append(str(start) if start == cpu else f"{start}-{cpu}")
            start = None
    return ",".join(parts)


def node_cpus(root: Path = NODE_SYSFS) -> dict[int, tuple[int, ...]]:
    """NUMA node -> its cpus, as sysfs lists them (a node without cpus has none); {} without NUMA
    support in the kernel. The one reader of the nodes' cpulists."""
    nodes = {}
    for path in sorted(Path(root).glob("node[0-9]*"), key=lambda p: int(p.name[4:])):
        try:
            nodes[int(path.name[4:])] = tuple(parse_cpulist((path / "cpulist").read_text()))
        except FileNotFoundError:
            nodes[int(path.name[4:])] = ()
        except (OSError, ValueError):
            continue
    return nodes


def node_memory(root: Path = NODE_SYSFS) -> dict[int, int]:
    """NUMA node -> its memory in bytes (nodeN/meminfo's MemTotal); {} without NUMA support in the kernel."""
    found = {}
    for path in Path(root).glob("node[0-9]*"):
        try:
            for line in (path / "meminfo").read_text().splitlines():
                words = line.split()  # "Node 0 MemTotal:       16337740 kB"
                if len(words) >= 4 and words[2] == "MemTotal:":
                    found[int(path.name[4:])] = int(words[3]) * 1024
        except (OSError, ValueError):
            continue
    return dict(sorted(found.items()))


def _numa_nodes(usable: set[int]) -> dict[int, tuple[int, ...]]:
    nodes = {node: tuple(sorted(set(cpus) & usable)) for node, cpus in node_cpus().items()}
    return {node: cpus for node, cpus in nodes.items() if cpus} or {0: tuple(sorted(usable))}


def _own_cgroup(controller: str) -> str | None:
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controller in controllers.split(","):
                return path
    except OSError:
        pass
    return None


def _memory() -> int:
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    own = _own_cgroup("memory")
    limits = []
    if own is not None:
        limits.append(Path("/sys/fs/cgroup/memory") / own.lstrip("/") / "memory.limit_in_bytes")
    for path in limits:
        try:
            limit = int(path.read_text())
        except (OSError, ValueError):
            continue
        total = min(total, limit)
    return total


def _ip_json(*args) -> list:
    out = subprocess.run(["ip", "-j", *args], capture_output=True, text=True, timeout=10, check=True).stdout
    return json.loads(out or "[]")


def host_networks() -> tuple[tuple[tuple[str, ipaddress.IPv4Network], ...], bool]:
    """The host's IPv4 addresses and routes (not vnetbench's, not default routes); known?"""
    if not shutil.which("ip"):
        return (), False
    found = []
    try:
        for link in _ip_json("-4", "addr", "show"):
            if link.get("ifname", "").startswith(OWN_PREFIX):
                continue
            for addr in link.get("addr_info", []):
                net = ipaddress.IPv4Interface(f"{addr['local']}/{addr.get('prefixlen', 32)}").network
                found.append((f"the address {addr['local']}/{addr.get('prefixlen', 32)} on {link['ifname']}", net))
        for route in _ip_json("-4", "route", "show", "table", "all"):
            dst, dev = route.get("dst", ""), route.get("dev", "")
            if dst == "default" or dev.startswith(OWN_PREFIX):
                continue
            net = ipaddress.IPv4Network(dst if "/" in dst else f"{dst}/32", strict=False)
            if net.prefixlen == 0:
                continue
            found.append((f"the route to {net}" + (f" via {dev}" if dev else ""), net))
    except (OSError, subprocess.SubprocessError, ValueError, KeyError):
        return tuple(found), False
    return tuple(found), True


def detect() -> HostFacts:
    usable = set(os.sched_getaffinity(0))
    networks, known = host_networks()
    return HostFacts(cpus_by_node=_numa_nodes(usable), memory=_memory(), networks=networks,
                     networks_known=known, name=os.uname().nodename, memory_by_node=node_memory())
