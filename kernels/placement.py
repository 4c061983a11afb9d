"""Where a rank really is, read by the rank itself: host, cpus, network namespace, addresses."""

import fcntl
import os
import platform
import socket
import struct

_SIOCGIFADDR = 0x8915


def ipv4_addresses() -> dict[str, str]:
    """Interface name -> IPv4 address, for the interfaces of this network namespace (not lo)."""
    found = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            if name == "lo":
                continue
            try:
                raw = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue  # no IPv4 address on it
            found[name] = socket.inet_ntoa(raw[20:24])
    return found


def _ns_inode(kind: str) -> int | None:
    try:
        return os.stat(f"/proc/self/ns/{kind}").st_ino
    except OSError:
        return None


def hypervisor() -> bool | None:
    """The CPU's hypervisor flag as this kernel sees it (a guest's CPU has it; so has a VM's host that is a VM
    itself), or None where /proc/cpuinfo says nothing of flags."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return "hypervisor" in line.split(":", 1)[1].split()
    except OSError:
        pass
    return None


def here(rank: int) -> dict:
    return {
        "rank": rank,
        "hostname": socket.gethostname(),
        "cpus": sorted(os.sched_getaffinity(0)),
        "pid": os.getpid(),
        "netns": _ns_inode("net"),
        "utsns": _ns_inode("uts"),
        "addresses": ipv4_addresses(),
        "hypervisor": hypervisor(),
        "kernel": platform.release(),
    }


def check_expected(placement: list[dict], expected: list[dict] | None) -> list[str]:
    """Compare each rank's own view with where the topology put it; mismatches as phrases.

    ``expected`` has one entry per rank with any of ``hostname``, ``address`` (must be one of
    the rank's addresses), ``cpus`` (the rank's cpus must be a subset) and ``netns`` (the inode
    of the network namespace the rank must be in).
    """
    if not expected:
        return []
    problems = []
    for seen, want in zip(placement, expected):
        rank = seen["rank"]
        if "hostname" in want and seen["hostname"] != want["hostname"]:
            problems.append(f"rank {rank} runs on {seen['hostname']!r}, expected {want['hostname']!r}")
        if "address" in want and want["address"] not in seen["addresses"].values():
            problems.append(f"rank {rank} has addresses {sorted(seen['addresses'].values())}, "
                            f"expected {want['address']}")
        if "netns" in want and seen.get("netns") != want["netns"]:
            problems.append(f"rank {rank} is in network namespace {seen.get('netns')}, "
                            f"expected {want['netns']} (its VM's)")
        if "cpus" in want and not set(seen["cpus"]) <= set(want["cpus"]):
            problems.append(f"rank {rank} runs on cpus {seen['cpus']}, outside its VM's {want['cpus']}")
    return problems
