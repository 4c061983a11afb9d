"""``vnetbench hosts check|facts|fetch``: the hosts of a topology (an inventory, a hostfile, a Slurm partition), through
the backend that has them.

check   every host reachable, the same vnetbench, Open MPI and Python at the same path, SSH from
        host to host, clocks in sync; free memory and cores shown. Exit 1 if any host fails.
facts   CPU model, cores, NUMA layout, NICs and their speeds, into the store's environment record.
fetch   records in a file on the hosts (a store, or --record files), appended to the local store.
"""

import json
import sys

from vnetbench.analysis.render import columns
from vnetbench.core.options import float_range
from vnetbench.core.store import DEFAULT_PATH

from . import COMMANDS


def register(sub):
    parser = sub.add_parser("hosts", help=COMMANDS["hosts"], description=__doc__.replace("``", ""))
    parser.set_defaults(func=lambda args: _usage(parser))
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    check = actions.add_parser("check", help="check the hosts can run vnetbench together (exit 1 if not)",
                               description="Check every host in parallel; print a table and a verdict.")
    _common(check, "hosts check")
    check.add_argument("--clock-tolerance", type=float_range(0.0), default=2.0, metavar="S",
                       help="largest clock offset from this machine allowed (default 2 s)")
    check.add_argument("--json", action="store_true", help="print the reports as JSON on stdout")
    from vnetbench.mpi import selection as mpiselect

    mpiselect.add_option(check)
    check.set_defaults(func=handle_check)
    facts = actions.add_parser("facts", help="gather CPU, NUMA and NIC facts into the store's environment record",
                               description="Gather each host's facts; merge them into STORE's environment record.")
    _common(facts, "hosts facts")
    facts.add_argument("--store", default=str(DEFAULT_PATH), metavar="PATH", help=f"(default {DEFAULT_PATH})")
    facts.add_argument("--json", action="store_true", help="print the facts as JSON on stdout")
    facts.set_defaults(func=handle_facts)
    fetch = actions.add_parser("fetch", help="append the records of a file on the hosts to the local store",
                               description="Fetch REMOTE from every host; append the records the store lacks.")
    fetch.add_argument("remote", metavar="REMOTE", help="path of a store or record file on the hosts")
    _common(fetch, "hosts fetch")
    fetch.add_argument("--store", default=str(DEFAULT_PATH), metavar="PATH", help=f"(default {DEFAULT_PATH})")
    fetch.set_defaults(func=handle_fetch)


def _common(parser, command: str):
    from .common import add_host_source

    add_host_source(parser, command)
    parser.set_defaults(hosts_command=command)
    parser.add_argument("--venv", metavar="PATH", help="where vnetbench is on the hosts (default: vnetbench_venv, "
                                                       "else this vnetbench's own venv)")
    parser.add_argument("--timeout", type=float_range(1.0), default=20.0, metavar="S",
                        help="seconds for each connection and each remote command (default 20)")


def _usage(parser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _load(args):
    """The topology the options name, through the one loader (``common.topology_source``: ``--topology REF`` as it
    is, a backend's option its ref)."""
    from vnetbench import topologies
    from .common import topology_source

    ref, given = topology_source(args, args.hosts_command)
    return topologies.load(ref, what=given)


def _backend(topology):
    from vnetbench import topologies

    return topologies.backend(topology.backend)


def _size(value) -> str:
    return f"{value / 2**30:.1f} GiB" if isinstance(value, (int, float)) else "?"


def handle_check(args) -> int:
    topology = _load(args)
    reports = _backend(topology).check_hosts(topology, venv=args.venv, timeout=args.timeout,
                                             clock_tolerance=args.clock_tolerance, mpi=args.mpi)
    if args.json:
        print(json.dumps([{"name": r.name, "address": r.address, "ok": r.ok, "problems": r.problems,
                           "clock_offset_s": r.clock_offset, "clock_window_s": r.clock_window, "probe": r.probe} for r in reports], indent=2))
    rows = []
    for r in reports:
        p = r.probe
        peers = p.get("peers", {})
        rows.append([r.name, r.address, "ok" if r.reached else "FAIL", p.get("vnetbench", "-"),
                     p.get("open_mpi", "-"), p.get("python", "-"),
                     f"{sum(1 for e in peers.values() if not e)}/{len(peers)}" if p else "-",
                     f"{r.clock_offset:+.2f} s" if r.clock_offset is not None else "-",
                     str(p.get("usable_cores", "-")), _size(p.get("mem_available")) if p else "-",
                     "ok" if r.ok else "FAIL"])
    out = sys.stderr if args.json else sys.stdout
    print(columns(["HOST", "ADDRESS", "SSH", "VNETBENCH", "OPEN MPI", "PYTHON", "SSH TO PEERS", "CLOCK", "CORES",
                 "MEM FREE", "VERDICT"], rows), file=out)
    failed = [r for r in reports if not r.ok]
    for r in failed:
        for problem in r.problems or ["not reached"]:
            print(f"{r.name}: {problem}", file=out)
    venv = args.venv or getattr(topology, "venv", None) or sys.prefix
    if failed:
        print(f"verdict: FAIL: {len(failed)} of {len(reports)} hosts failed: {', '.join(r.name for r in failed)}",
              file=out)
        return 1
    print(f"verdict: ok: all {len(reports)} hosts can run vnetbench together from {venv}", file=out)
    return 0


def handle_facts(args) -> int:
    from vnetbench.core.hostfacts import save_facts

    topology = _load(args)
    found = _backend(topology).facts(topology, venv=args.venv, timeout=args.timeout)
    path = save_facts(args.store, found, topology.source)
    if args.json:
        print(json.dumps(found, indent=2, sort_keys=True))
    rows = []
    for name, f in found.items():
        if "error" in f:
            rows.append([name, "-", "-", "-", "-", f"FAIL: {f['error']}"])
            continue
        nics = ", ".join(f"{nic} {info['speed_mbps']} Mb/s" if info["speed_mbps"] else nic
                         for nic, info in f["nics"].items() if nic != "lo")
        rows.append([name, f["cpu_model"] or "?", f"{f['logical_cpus']} ({f['physical_cores'] or '?'} cores)",
                     str(len(f["numa"]) or "?"), nics or "-", "ok"])
    print(columns(["HOST", "CPU", "CPUS", "NUMA NODES", "NICS", "RESULT"], rows), file=sys.stderr if args.json
          else sys.stdout)
    failed = [name for name, f in found.items() if "error" in f]
    print(f"vnetbench: facts of {len(found) - len(failed)} host(s) in {path}", file=sys.stderr)
    return 1 if failed else 0


def handle_fetch(args) -> int:
    from vnetbench.engine.ingest import Intake
    from vnetbench.core.store import Store

    topology = _load(args)
    intake = Intake(Store(args.store))  # before any host is asked: a store it cannot write is refused first
    summary = _backend(topology).fetch(topology, args.remote, intake.add, timeout=args.timeout)
    rows = []
    for name, s in summary.items():
        state = f"FAIL: {s['error']}" if "error" in s else "no such file" if s.get("missing") else \
            f"{s['new']} new, {s['known']} already stored, {s['bad']} unreadable"
        rows.append([name, state])
    print(columns(["HOST", args.remote], rows))
    failed = [name for name, s in summary.items() if "error" in s]
    new = sum(s.get("new", 0) for s in summary.values())
    print(f"vnetbench: {new} record(s) appended to {args.store}", file=sys.stderr)
    if failed:
        return 1
    return 0 if any(not s.get("missing") for s in summary.values()) else 1
