"""The TCP listeners a command's processes open while it runs, as ``ss -ltnp`` would show them: read from
/proc/net/tcp and tcp6 (this network namespace's) and each process's file descriptors, polled until the command
ends. Only processes in this test's network namespace count: ranks inside an emulated VM listen in the VM's own."""

import os
import subprocess
import time
from dataclasses import dataclass, field

RANK = [b"-m", b"vnetbench.kernels"]  # a rank's command line: PYTHON -m vnetbench.kernels KERNEL ...


@dataclass
class Listener:
    address: str  # "0.0.0.0", "::", "127.0.0.1", ...
    port: int
    holders: set = field(default_factory=set)  # (command name, is a rank) of every process holding it

    @property
    def wildcard(self) -> bool:
        return self.address in ("0.0.0.0", "::")

    @property
    def ranks_only(self) -> bool:
        """Held by ranks alone (a socket a launcher opened and its ranks inherited is the launcher's)."""
        return all(rank for _, rank in self.holders)


def _address(hex_address: str) -> str:
    import ipaddress

    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))
    # /proc/net/tcp6: four 32-bit words, each in host (little-endian) order
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    return str(ipaddress.IPv6Address(words))


def _listening() -> dict[str, tuple[str, int]]:
    """socket inode -> (address, port) of every listening TCP socket of this network namespace."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as handle:
            for line in handle.read().splitlines()[1:]:
                words = line.split()
                if words[3] == "0A":  # TCP_LISTEN
                    address, port = words[1].split(":")
                    found[words[9]] = (_address(address), int(port, 16))
    return found


def _tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def watch(argv: list[str], timeout: float, **popen) -> tuple[subprocess.CompletedProcess, list[Listener]]:
    """Run ``argv`` to its end (killed at ``timeout``), polling its process tree's listeners; what it returned,
    and every listener seen, with who held it."""
    here = os.stat("/proc/self/ns/net").st_ino
    seen: dict[tuple[str, int], Listener] = {}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
    deadline = time.monotonic() + timeout
    import threading

    outputs = {}
    readers = [threading.Thread(target=lambda name, pipe: outputs.__setitem__(name, pipe.read()), args=(name, pipe))
               for name, pipe in (("out", proc.stdout), ("err", proc.stderr))]
    for reader in readers:
        reader.start()
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            table = _listening()
            for pid in _tree(proc.pid):
                try:
                    if os.stat(f"/proc/{pid}/ns/net").st_ino != here:
                        continue
                    with open(f"/proc/{pid}/comm") as handle:
                        name = handle.read().strip()
                    with open(f"/proc/{pid}/cmdline", "rb") as handle:
                        rank = handle.read().split(b"\0")[1:3] == RANK
                    for fd in os.listdir(f"/proc/{pid}/fd"):
                        target = os.readlink(f"/proc/{pid}/fd/{fd}")
                        if target.startswith("socket:[") and target[8:-1] in table:
                            address, port = table[target[8:-1]]
                            seen.setdefault((address, port), Listener(address, port)).holders.add((name, rank))
                except OSError:
                    continue  # gone meanwhile
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for reader in readers:
            reader.join()
    return subprocess.CompletedProcess(argv, proc.returncode, outputs.get("out", ""), outputs.get("err", "")), \
        list(seen.values())
