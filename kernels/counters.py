"""Per-rank performance counters through perf_event_open(2): counted around the kernel, in-process.

Hardware events (cycles, instructions, last-level-cache and node-local/remote misses) are often
hidden inside VMs; each event that cannot be opened is reported with the reason, never guessed.
"""

import ctypes
import ctypes.util
import os
import platform
import struct

_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241, "ppc64le": 319}
_ENABLE, _DISABLE, _RESET = 0x2400, 0x2401, 0x2403
_TYPE_HARDWARE, _TYPE_SOFTWARE, _TYPE_HW_CACHE = 0, 1, 3


def _cache(cache_id: int, result_miss: bool) -> int:
    return cache_id | (0 << 8) | ((1 if result_miss else 0) << 16)  # op: read


# name -> (type, config)
EVENTS = {
    "cycles": (_TYPE_HARDWARE, 0),
    "instructions": (_TYPE_HARDWARE, 1),
    "llc_misses": (_TYPE_HW_CACHE, _cache(2, True)),          # LL read misses
    "node_local_loads": (_TYPE_HW_CACHE, _cache(6, False)),   # NODE read accesses: memory on this node
    "node_remote_loads": (_TYPE_HW_CACHE, _cache(6, True)),   # NODE read misses: memory on another node
    "task_clock_ns": (_TYPE_SOFTWARE, 1),
    "page_faults": (_TYPE_SOFTWARE, 2),
    "context_switches": (_TYPE_SOFTWARE, 3),
    "cpu_migrations": (_TYPE_SOFTWARE, 4),
}


def _attr(kind: int, config: int) -> bytes:
    # struct perf_event_attr, PERF_ATTR_SIZE_VER0 (64 bytes): disabled, exclude_kernel, exclude_hv
    flags = 1 | (1 << 5) | (1 << 6)
    return struct.pack("IIQQQQQII", kind, 64, config, 0, 0, 0, flags, 0, 0).ljust(64, b"\0")


class Counters:
    """Open every event for this process; ``start()``, ``stop()``, then ``result()``."""

    def __init__(self, events=EVENTS):
        self.fds: dict[str, int] = {}
        self.unavailable: dict[str, str] = {}
        machine = platform.machine()
        if machine not in _PERF_EVENT_OPEN:
            self.unavailable = {name: f"perf_event_open unknown on {machine}" for name in events}
            return
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self._ioctl = libc.ioctl
        for name, (kind, config) in events.items():
            attr = ctypes.create_string_buffer(_attr(kind, config), 64)
            fd = libc.syscall(_PERF_EVENT_OPEN[machine], attr, 0, -1, -1, 8)  # this process, any cpu, cloexec
            if fd < 0:
                err = ctypes.get_errno()
                self.unavailable[name] = f"not readable here ({os.strerror(err)})"
            else:
                self.fds[name] = fd

    def _all(self, request: int) -> None:
        for fd in self.fds.values():
            self._ioctl(fd, request, 0)

    def start(self) -> None:
        self._all(_RESET)
        self._all(_ENABLE)

    def stop(self) -> None:
        self._all(_DISABLE)

    def result(self) -> dict:
        values = {}
        for name, fd in self.fds.items():
            values[name] = struct.unpack("Q", os.read(fd, 8))[0]
            os.close(fd)
        self.fds = {}
        return {"events": values, "unavailable": self.unavailable}
