"""Running one program to its end: wall time from start to exit, its JSON output, and cleanup.

Other work on the machine is the main source of noise here, so every run also says how many
cores other processes kept busy while it ran: all busy time in /proc/stat minus the CPU time
of the run's own process tree (waited-for children's rusage).
"""

import json
import os
import resource
import subprocess
import time
from dataclasses import dataclass

from vnetbench import mpi
from vnetbench.core import procs


@dataclass
class Finished:
    argv: list[str]
    returncode: int | None
    wall_s: float
    stdout: str
    stderr: str
    timed_out: bool = False
    others_busy: float | None = None  # cores other processes kept busy during the run

    def problem(self) -> str | None:
        if self.timed_out:
            return f"timed out after {self.wall_s:.0f} s"
        if self.returncode != 0:
            tail = " | ".join(line for line in self.stderr.strip().splitlines()[-4:])
            return f"exited with {self.returncode}: {tail}"
        return None

    def json_lines(self) -> list[dict]:
        """Every stdout line that is a JSON object (the references print one; vnetbench its records)."""
        found = []
        for line in self.stdout.splitlines():
            if line.startswith("{"):
                try:
                    found.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return found


def busy_seconds() -> float | None:
    """CPU-seconds the whole machine has spent busy since boot (all cores), or None."""
    try:
        with open("/proc/stat") as handle:
            fields = [int(value) for value in handle.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def others_busy_now(window: float = 0.5) -> float | None:
    """Cores kept busy by other processes over the next ``window`` seconds (we are idle meanwhile)."""
    before = busy_seconds()
    time.sleep(window)
    after = busy_seconds()
    return None if before is None or after is None else (after - before) / window


def wait_for_quiet(max_wait: float, threshold: float = 0.5) -> float | None:
    """Wait up to ``max_wait`` s for other processes to use under ``threshold`` cores; the last reading."""
    deadline = time.monotonic() + max_wait
    busy = others_busy_now()
    while busy is not None and busy >= threshold and time.monotonic() < deadline:
        busy = others_busy_now()
    return busy


def run(argv: list[str], timeout: float, env: dict | None = None) -> Finished:
    """Start ``argv`` (in ``env``, default vnetbench's ``mpi.run_env()``) in a session of its own and time it
    to its exit; kill what is left after."""
    env = mpi.run_env() if env is None else env
    busy_before, ours_before = busy_seconds(), _children_cpu()
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True)
    timed_out = False
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        procs.kill_session(proc.pid)
        stdout, stderr = proc.communicate()
    wall = time.perf_counter() - start
    busy_after, ours_after = busy_seconds(), _children_cpu()
    procs.kill_session(proc.pid)  # ranks must not outlive their mpirun into the next measurement
    others = None
    if busy_before is not None and busy_after is not None and wall > 0:
        # the run's own ranks are mpirun's descendants, reaped by mpirun and so counted in its rusage
        others = max(0.0, (busy_after - busy_before) - (ours_after - ours_before)) / wall
    return Finished(argv, proc.returncode, wall, stdout, stderr, timed_out, others)
