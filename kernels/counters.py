"""Per-rank performance counters through perf_event_open(2): counted around the kernel, in-process.

Hardware events (cycles, instructions, last-level-cache and node-local/remote misses) are often
hidden inside VMs; each event that cannot be opened is reported with the reason, never guessed.
Events are opened as groups read with time enabled and time running: when the PMU is shared
(multiplexed) a count covers only part of the run, and it is scaled up as perf stat does; the
record keeps the raw count and the running/enabled ratio beside the scaled value.
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


# read_format: one read() of the leader returns the whole group with its times (perf stat's way)
_FORMAT_TOTAL_TIME_ENABLED, _FORMAT_TOTAL_TIME_RUNNING, _FORMAT_GROUP = 1, 2, 8
_READ_FORMAT = _FORMAT_TOTAL_TIME_ENABLED | _FORMAT_TOTAL_TIME_RUNNING | _FORMAT_GROUP
_IOC_FLAG_GROUP = 1
_HARDWARE = (_TYPE_HARDWARE, _TYPE_HW_CACHE)


def _attr(kind: int, config: int, leader: bool) -> bytes:
    # struct perf_event_attr, PERF_ATTR_SIZE_VER0 (64 bytes): exclude_kernel, exclude_hv; the leader
    # starts disabled and enables its members with it
    flags = (1 if leader else 0) | (1 << 5) | (1 << 6)
    return struct.pack("IIQQQQQII", kind, 64, config, 0, 0, _READ_FORMAT, flags, 0, 0).ljust(64, b"\0")


def scale(raw: int, enabled_ns: int, running_ns: int) -> dict:
    """One event's count as perf stat reports it: scaled by time enabled / time running when the PMU
    was shared (multiplexed); ``ratio`` is running / enabled (1.0: counted the whole time)."""
    if running_ns <= 0:  # never scheduled: perf stat's "<not counted>"
        return {"raw": raw, "ratio": 0.0, "scaled": None}
    ratio = min(1.0, running_ns / enabled_ns) if enabled_ns > 0 else 1.0
    return {"raw": raw, "ratio": ratio, "scaled": round(raw * enabled_ns / running_ns)}


class Counters:
    """Open the events for this process as perf event groups (hardware events in one, software in
    another, so a PMU hidden in a VM costs the software group nothing); ``start()``, ``stop()``,
    then ``result()``."""

    def __init__(self, events=EVENTS):
        self.groups: list[list[tuple[str, int]]] = []  # each [(name, fd)], the leader first
        self.unavailable: dict[str, str] = {}
        machine = platform.machine()
        if machine not in _PERF_EVENT_OPEN:
            self.unavailable = {name: f"perf_event_open unknown on {machine}" for name in events}
            return
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self._ioctl = libc.ioctl
        for hardware in (True, False):
            group: list[tuple[str, int]] = []
            for name, (kind, config) in events.items():
                if (kind in _HARDWARE) != hardware:
                    continue
                leader = group[0][1] if group else -1
                attr = ctypes.create_string_buffer(_attr(kind, config, not group), 64)
                fd = libc.syscall(_PERF_EVENT_OPEN[machine], attr, 0, -1, leader, 8)  # this process, any cpu, cloexec
                if fd < 0:
                    self.unavailable[name] = f"not readable here ({os.strerror(ctypes.get_errno())})"
                else:
                    group.append((name, fd))
            if group:
                self.groups.append(group)

    def _leaders(self, request: int) -> None:
        for group in self.groups:
            self._ioctl(group[0][1], request, _IOC_FLAG_GROUP)

    def start(self) -> None:
        self._leaders(_RESET)
        self._leaders(_ENABLE)

    def stop(self) -> None:
        self._leaders(_DISABLE)

    def result(self) -> dict:
        """{"events": name -> scaled count, "raw": name -> count, "ratio": name -> running/enabled,
        "unavailable": name -> why}; an event of a group that never got the PMU is unavailable."""
        out = {"events": {}, "raw": {}, "ratio": {}, "unavailable": self.unavailable}
        for group in self.groups:
            size = 8 * (3 + len(group))
            data = os.read(group[0][1], size)
            count, enabled, running, *values = struct.unpack(f"{len(data) // 8}Q", data)
            for (name, _), raw in zip(group, values[:count]):
                scaled = scale(raw, enabled, running)
                if scaled["scaled"] is None:
                    out["unavailable"][name] = "not counted (its group never got the PMU)"
                    continue
                out["events"][name] = scaled["scaled"]
                out["raw"][name] = raw
                out["ratio"][name] = scaled["ratio"]
            for _, fd in group:
                os.close(fd)
        self.groups = []
        return out
