"""``hosts check`` on a Slurm partition: the hosts backend's probe, run on every usable node through ``srun``.

One task per usable node runs ``hostcheck.probe`` (vnetbench imports, mpirun, Python, cores, memory) with the
same venv; the every-host comparison (same versions everywhere) and the clock check follow. There is no SSH
between nodes to check: the MPI reaches them through Slurm.
"""

import inspect
import json
import sys
import time
from dataclasses import dataclass

from vnetbench.core.errors import UsageError

from ..launch import hostcheck
from ..base import HostReport
from .cluster import discover, slurm_cmd


@dataclass
class _Outcome:  # what hostcheck.read_probe reads of a remote command
    stdout: str
    stderr: str = ""
    exited: int = 0


def check(partition: str, *, venv: str | None = None, timeout: float = 20.0, clock_tolerance: float = 2.0,
          mpi: str | None = None) -> list[HostReport]:
    """One report per usable node of ``partition``; UsageError when it has none."""
    venv = venv or sys.prefix
    cluster = discover(partition)
    nodes = cluster.usable()
    if not nodes:
        raise UsageError(f"partition {partition} has no usable node ({len(cluster.nodes)} in all)")
    spec = {"timeout": timeout / 2, "ssh": [], "peers": [], "mpi": mpi}
    source = (f"import json, sys, time\n{inspect.getsource(hostcheck.probe)}\n"
              f"out = probe(json.loads(sys.argv[1])); out['clock'] = time.time(); print(json.dumps(out))")
    argv = ["srun", f"--partition={partition}", f"--nodes={len(nodes)}", f"--nodelist={','.join(nodes)}",
            "--ntasks-per-node=1", f"--time={max(1, int(timeout // 60) + 1)}", "--label",
            f"{venv}/bin/python", "-c", source, json.dumps(spec)]
    sent = time.time()
    out = slurm_cmd(*argv, timeout=timeout * 3, check=False)
    back = time.time()
    by_host = {}
    for line in out.splitlines():
        _, sep, text = line.partition(": ")  # srun --label: "TASK: LINE"
        if sep and text.startswith("{"):
            try:
                by_host[json.loads(text)["hostname"]] = text
            except (ValueError, KeyError, TypeError):
                continue
    reports = []
    for node in nodes:
        report = HostReport(node, cluster.nodes[node]["address"])
        if node in by_host:
            hostcheck.read_probe(report, _Outcome(by_host[node]), venv, timeout)
            clock = report.probe.pop("clock", None)
            if isinstance(clock, (int, float)):
                # read between sending and receiving: known to within half the round trip
                report.clock_window = (back - sent) / 2
                report.clock_offset = clock - (sent + back) / 2
                if abs(report.clock_offset) > clock_tolerance + report.clock_window:
                    report.problems.append(f"clock is {report.clock_offset:+.1f} s off this machine's")
        else:
            report.problems.append(f"no answer through srun on partition {partition}")
        reports.append(report)
    hostcheck.compare(reports, venv)
    return reports
