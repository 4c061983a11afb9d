"""``hosts check --slurm PARTITION``: the SSH hosts' checks, run on a partition's nodes through ``srun``.

One task per usable node runs the same probe as ``hosts check`` (vnetbench imports, mpirun, Python, cores,
memory) with the same venv; the hosts' comparisons (same versions everywhere) and the clock check follow.
There is no SSH between nodes to check: mpirun reaches them through Slurm.
"""

import inspect
import json
import sys
import time
from dataclasses import dataclass

from vnetbench.errors import UsageError
from vnetbench.topologies import hostcheck, slurm
from vnetbench.topologies.base import HostReport


@dataclass
class _Outcome:  # what hosts._read_probe reads of a remote command
    stdout: str
    stderr: str = ""
    exited: int = 0


def check(partition: str, *, venv: str | None = None, timeout: float = 20.0, clock_tolerance: float = 2.0,
          mpi: str | None = None) -> list:
    venv = venv or sys.prefix
    cluster = slurm.discover(partition)
    nodes = cluster.usable()
    if not nodes:
        raise UsageError(f"--slurm: partition {partition} has no usable node ({len(cluster.nodes)} in all)")
    spec = {"timeout": timeout / 2, "ssh": [], "peers": [], "mpi": mpi}
    source = (f"import json, sys, time\n{inspect.getsource(hostcheck.probe)}\n"
              f"out = probe(json.loads(sys.argv[1])); out['clock'] = time.time(); print(json.dumps(out))")
    argv = ["srun", f"--partition={partition}", f"--nodes={len(nodes)}", f"--nodelist={','.join(nodes)}",
            "--ntasks-per-node=1", f"--time={max(1, int(timeout // 60) + 1)}", "--label",
            f"{venv}/bin/python", "-c", source, json.dumps(spec)]
    sent = time.time()
    out = slurm.slurm_cmd(*argv, timeout=timeout * 3, check=False)
    back = time.time()
    by_host = {}
    for line in out.splitlines():
        _, sep, text = line.partition(": ")
        if sep and text.startswith("{"):
            try:
                by_host[json.loads(text)["hostname"]] = text
            except (ValueError, KeyError):
                continue
    reports = []
    for node in nodes:
        report = HostReport(node, cluster.nodes[node]["address"])
        if node in by_host:
            hostcheck.read_probe(report, _Outcome(by_host[node]), venv, timeout)
            report.clock_window = (back - sent) / 2
            report.clock_offset = report.probe.pop("clock") - (sent + back) / 2
            if abs(report.clock_offset) > clock_tolerance + report.clock_window:
                report.problems.append(f"clock is {report.clock_offset:+.1f} s off this machine's")
        else:
            report.problems.append(f"no answer through srun on partition {partition}")
        reports.append(report)
    hostcheck.compare(reports, venv)
    return reports
