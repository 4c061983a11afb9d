"""``vnetbench run KERNEL``: one kernel configuration, repeated, stored, shown."""

import argparse
import json
import sys

from vnetbench import kernels
from vnetbench.errors import UsageError
from vnetbench.options import float_range, int_range
from vnetbench.store import DEFAULT_PATH
from vnetbench.topologies.base import MAX_RANKS


def add_common(parser, *, ranks_default=None):
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--topology", default="native", metavar="NAME|FILE",
                       help="preset name, topology YAML, Ansible inventory or hostfile (default native: this "
                            "host, no VMs)")
    where.add_argument("--hostfile", metavar="FILE", help="real hosts from an Open MPI hostfile")
    where.add_argument("--inventory", metavar="FILE", help="real hosts from an Ansible inventory (YAML or INI)")
    parser.add_argument("--repeat", type=int_range(1, 1000), default=1, metavar="R",
                        help="repetitions, each stored as its own record (default 1)")
    parser.add_argument("--store", default=str(DEFAULT_PATH), metavar="PATH",
                        help=f"results store, JSON Lines (default {DEFAULT_PATH})")
    parser.add_argument("--timeout", type=float_range(0.001), metavar="S",
                        help="seconds before a run is killed and recorded as 'timeout' (default: per kernel)")
    parser.add_argument("--bind", choices=["core", "none"],
                        help="bind each rank to a core (default when ranks fit the cores) or not")
    kernels.add_rank_options(parser)
    from vnetbench import mpiselect

    mpiselect.add_option(parser)


def register(sub):
    parser = sub.add_parser("run", help="run one kernel on a topology", description=__doc__.replace("``", ""),
                            add_help=False)
    # optional to argparse, so that 'run --help' is help (exit 0); handle() requires it
    parser.add_argument("kernel", metavar="KERNEL", nargs="?", help=f"one of: {', '.join(kernels.names())}")
    parser.add_argument("--ranks", type=int_range(1, MAX_RANKS), default=2, metavar="N",
                        help="MPI ranks (default 2)")
    add_common(parser)
    from .apps import add_app_option

    add_app_option(parser)
    parser.add_argument("--json", action="store_true", help="print the records as JSON Lines on stdout")
    parser.add_argument("--format", choices=["table", "osu"], default="table",
                        help="table (with per-size rows) or osu: per-size rows in the OSU benchmarks' layout")
    parser.add_argument("-h", "--help", action="store_true", help="show help (with KERNEL: its options)")
    parser.set_defaults(func=handle, parser=parser, takes_extra=True)


def parse_kernel_options(args, parser) -> dict:
    if args.help:
        print_help(parser, args.kernel)
        raise SystemExit(0)
    if args.kernel is None:
        raise UsageError(f"KERNEL: missing; choose from {', '.join(kernels.names())} "
                         f"('vnetbench run --help' describes them)")
    return kernels.parse_params(args.kernel, args.extra)


def print_help(parser, kernel):
    parser.print_help()
    if kernel is None:
        print("\nkernels:")
        for name in kernels.names():
            print(f"  {name:<10} {kernels.get(name).DESCRIPTION}")
        print("\n'vnetbench run KERNEL --help' shows a kernel's own options.")
    elif kernel in kernels.names():
        sub = argparse.ArgumentParser(prog=f"vnetbench run {kernel}", add_help=False,
                                      description=kernels.get(kernel).DESCRIPTION)
        kernels.get(kernel).add_arguments(sub)
        print(f"\noptions of kernel {kernel}:")
        print(sub.format_help().split("\n", 2)[-1])


def topology_of(args):
    """The topology to run on: a name or file for ``load``, or hosts read from --hostfile/--inventory."""
    if args.hostfile or args.inventory:
        from vnetbench.topologies.inventory import load_hosts

        return load_hosts(inventory=args.inventory, hostfile=args.hostfile)
    return args.topology


def rank_options(args) -> dict:
    return {key: getattr(args, key) for key in kernels.RANK_OPTIONS if getattr(args, key)}


def handle(args) -> int:
    from vnetbench import runner

    if args.app and not args.help:
        from . import apps

        return apps.run(args)
    params = parse_kernel_options(args, args.parser)
    if args.format == "osu":
        from vnetbench.analysis import osu

        osu.check(args.kernel)
    shown = []

    def show(record):
        shown.append(record)
        if args.json:
            print(json.dumps(record, sort_keys=True), flush=True)

    records = runner.run_kernel(args.kernel, params, args.ranks, topology=topology_of(args), repeat=args.repeat,
                                store=args.store, timeout=args.timeout, bind=args.bind, on_record=show,
                                rank_options=rank_options(args), mpi=args.mpi)
    if not args.json:
        from vnetbench.analysis import report

        print(report.run_text(records, args.format))
    print(f"vnetbench: {len(records)} record(s) appended to {args.store}", file=sys.stderr)
    return 0 if all(record["status"] == "ok" for record in records) else 1
