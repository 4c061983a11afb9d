"""Where the suite's time goes, tier by tier: each tier's wall time, and the CPU its lane used meanwhile.

The suite is CPU-bound on a 2-core machine: what a change to it saves shows in CPU seconds, and ``time`` does
not count them all (the daemons, sshd hosts and guests a lane starts are reparented away from the runner). So
tests/harness/lanes.py runs each lane in a cpuacct cgroup of its own (``Meter``), whose usage counts every
process the lane starts, samples both lanes' usage and the machine's busy and idle time (/proc/stat) once a
second, and has each lane's pytest note when it begins a tier (``begin``, from tests/conftest.py). When both
lanes have ended it prints each tier's wall time and its lane's CPU seconds meanwhile, and the machine's; then the
dearest tests: each test's CPU is its lane's group's usage from its set-up's start to its teardown's end, read by the
lane's pytest itself (``Tests``), so that it counts the daemons and guests the test keeps busy meanwhile (a guest a
module's fixture booted, running under a later test, counts in that test).
Where cpuacct is no v1 hierarchy of its own (a cgroup v2 host; cpu and cpuacct mounted together, which would make
each lane a group of the CPU scheduler as well) the table has the wall times and the machine's CPU.
"""

import bisect
import os
import threading
import time
from pathlib import Path

TIMELINE = "VNETBENCH_TEST_TIMELINE"  # the file a lane's pytest writes the beginnings of its tiers to
COSTS = "VNETBENCH_TEST_COSTS"  # the file a lane's pytest writes each test's CPU and wall seconds to
DEAREST = 12  # the tests the run's end names, dearest in CPU first
GROUP = "vnbtest-lane-"  # + the lane's name, in cpuacct's hierarchy: not "vnb-*", no topology's
PERIOD = 1.0  # seconds between samples
Sample = tuple[float, dict[str, float], float, float]  # (time, {lane: its CPU seconds}, machine busy, machine idle)
_last: dict[str, str] = {}  # timeline file -> the tier last written to it


def begin(tier: str) -> None:
    """The lane's pytest starts a test of ``tier``: a line "TIME TIER" where it is not the tier before (nothing
    without $VNETBENCH_TEST_TIMELINE: a session lanes.py did not start)."""
    path = os.environ.get(TIMELINE)
    if not path:
        return
    if _last.get(path) != tier:
        _last[path] = tier
        with open(path, "a") as out:
            out.write(f"{time.time():.3f} {tier}\n")


def end() -> None:
    """The lane's session ends: the last tier ends with it ("TIME -")."""
    path = os.environ.get(TIMELINE)
    if path and path in _last:
        with open(path, "a") as out:
            out.write(f"{time.time():.3f} -\n")


def own_usage_file() -> Path | None:
    """The usage file of this process's group in cpuacct's v1 hierarchy (under lanes.py: its lane's group), None
    where there is none (cgroup v2, cpuacct mounted with cpu)."""
    folder = _cpuacct()  # this process's own group's folder
    return None if folder is None else folder / "cpuacct.usage"


def usage(path: Path | None) -> float | None:
    """CPU seconds from a cpuacct.usage file; None without one, or where it cannot be read."""
    try:
        return int(path.read_text()) / 1e9 if path is not None else None
    except (OSError, ValueError):
        return None


class Tests:
    """Each test's cost as its lane saw it, one line a test ("CPU WALL NODEID", CPU "-" where the lane has no
    cpuacct group), appended to $VNETBENCH_TEST_COSTS; nothing without it (a session lanes.py did not start)."""

    def __init__(self):
        self.path = os.environ.get(COSTS)
        self.usage_file = own_usage_file() if self.path else None
        self._began: tuple[float | None, float] | None = None

    def began(self) -> None:
        if self.path:
            self._began = (usage(self.usage_file), time.monotonic())

    def ended(self, nodeid: str) -> None:
        if not self.path or self._began is None:
            return
        (cpu0, wall0), cpu1 = self._began, usage(self.usage_file)
        cpu = "-" if cpu0 is None or cpu1 is None else f"{cpu1 - cpu0:.2f}"
        with open(self.path, "a") as out:
            out.write(f"{cpu} {time.monotonic() - wall0:.2f} {nodeid}\n")
        self._began = None


def dearest(costs: dict[str, list[str]], count: int = DEAREST) -> str:
    """The ``count`` tests of all lanes (lane -> its costs file's lines) that cost the most CPU, dearest first;
    "" when no line has a CPU figure. A half-written line (a killed session's) is left out."""
    found = []
    for lane, lines in costs.items():
        for line in lines:
            fields = line.split(" ", 2)
            try:
                found.append((float(fields[0]), float(fields[1]), lane, fields[2]))
            except (IndexError, ValueError):
                continue
    if not found:
        return ""
    found.sort(key=lambda test: -test[0])
    rows = [f"tests: the {min(count, len(found))} dearest of {len(found)} tests - the CPU their lane used from each "
            f"one's set-up to its teardown (its fixtures' guests and daemons too), and its wall time"]
    rows += [f"  {lane:8} {cpu:6.1f} CPU-s {wall:6.1f} s  {nodeid}" for cpu, wall, lane, nodeid in found[:count]]
    return "\n".join(rows)


def windows(lines: list[str]) -> list[tuple[str, float, float]]:
    """(tier, began, ended) from a timeline's lines; a tier the session did not end (it was killed) is left out,
    and so is a line a killed session left half-written."""
    marks = []
    for line in lines:
        fields = line.split()
        try:
            marks.append((float(fields[0]), fields[1]))
        except (IndexError, ValueError):
            continue
    return [(tier, began, ended) for (began, tier), (ended, _) in zip(marks, marks[1:]) if tier != "-"]


def _cpuacct() -> Path | None:
    """This process's cgroup in cpuacct's v1 hierarchy, where cpuacct is mounted on its own: mounted with cpu
    ("cpu,cpuacct", one folder for both), a lane's group would also be a group of the CPU scheduler, and the lanes
    would then share the CPU half and half, not as their processes would - the meter would change what it
    measures."""
    from vnetbench.topologies.thishost import cgroups

    root = cgroups.v1_root("cpuacct")
    return None if root is None or root == cgroups.v1_root("cpu") else root


def _machine() -> tuple[float, float]:
    """(busy, idle) CPU seconds of the whole machine since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq + steal) / tick, (idle + iowait) / tick


class Meter:
    """The lanes' cpuacct groups (where there are some), and samples of their usage and of the machine's CPU taken
    once a second from its making until ``stop``."""

    def __init__(self, lanes: list[str]):
        root = _cpuacct()
        self.groups: dict[str, Path] = {}
        for lane in lanes if root is not None else ():
            folder = root / f"{GROUP}{lane}"
            try:
                folder.mkdir(exist_ok=True)
            except OSError:
                break
            self.groups[lane] = folder
        self.samples: list[Sample] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def folders(self, lane: str) -> list[Path]:
        """The cgroups the lane's first process joins (none without cpuacct)."""
        return [self.groups[lane]] if lane in self.groups else []

    def _usage(self) -> dict[str, float]:
        found = {lane: usage(folder / "cpuacct.usage") for lane, folder in self.groups.items()}
        return {lane: seconds for lane, seconds in found.items() if seconds is not None}

    def _sample(self) -> None:
        while True:
            self.samples.append((time.time(), self._usage(), *_machine()))
            if self._done.wait(PERIOD):
                self.samples.append((time.time(), self._usage(), *_machine()))
                return

    def stop(self) -> None:
        """The last sample taken (the groups are the caller's to remove, once the lanes' processes have left)."""
        self._done.set()
        self._thread.join()

    def table(self, timelines: dict[str, list[str]]) -> str:
        return table(self.samples, timelines, metered=bool(self.groups))


def at(samples: list[Sample], when: float, lane: str | None) -> float | None:
    """The lane's CPU seconds (lane None: the machine's busy seconds) at ``when``, between the samples around it;
    None without two samples or without the lane's usage."""
    times = [sample[0] for sample in samples]
    if len(times) < 2:
        return None
    i = min(max(bisect.bisect_left(times, when), 1), len(times) - 1)
    (t0, used0, busy0, _), (t1, used1, busy1, _) = samples[i - 1], samples[i]
    if lane is None:
        a, b = busy0, busy1
    elif lane in used0 and lane in used1:
        a, b = used0[lane], used1[lane]
    else:
        return None
    share = min(max((when - t0) / (t1 - t0), 0.0), 1.0) if t1 > t0 else 1.0
    return a + (b - a) * share


def spent(samples: list[Sample], lane: str | None, began: float, ended: float) -> float | None:
    a, b = at(samples, began, lane), at(samples, ended, lane)
    return None if a is None or b is None else b - a


def table(samples: list[Sample], timelines: dict[str, list[str]], metered: bool) -> str:
    """Each lane's tiers (from its timeline's lines): wall seconds, and the lane's CPU seconds over them where
    ``metered``; then the machine's busy and idle CPU over the samples."""
    rows = ["tests: where the time went - each tier's wall time, and the CPU its lane used meanwhile (its processes, "
            "daemons and guests: cpuacct)" if metered else
            "tests: where the time went - each tier's wall time (no cpuacct hierarchy of its own here to count each "
            "lane's CPU)"]

    def row(lane, tier, began, ended):
        cpu = spent(samples, lane, began, ended) if metered else None
        return f"  {lane:8} {tier:14} {ended - began:6.0f} s" + (f" {cpu:7.0f} CPU-s" if cpu is not None else "")

    for lane, lines in timelines.items():
        spans = windows(lines)
        rows += [row(lane, tier, began, ended) for tier, began, ended in spans]
        if spans:
            rows.append(row(lane, "(all)", spans[0][1], spans[-1][2]))
    if len(samples) >= 2:
        (t0, _, busy0, idle0), (t1, _, busy1, idle1) = samples[0], samples[-1]
        busy, idle = busy1 - busy0, idle1 - idle0
        rows.append(f"  machine: {busy:.0f} CPU-s busy and {idle:.0f} idle over {t1 - t0:.0f} s "
                    f"({busy / max(busy + idle, 1e-9):.0%} busy, {os.cpu_count()} CPUs)")
    return "\n".join(rows)
