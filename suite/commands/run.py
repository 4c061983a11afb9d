"""``vnetbench run KERNEL`` (or ``run --app FILE.yaml``): one configuration, repeated, stored, shown."""

import argparse
import json
import sys

from vnetbench import kernels
from vnetbench.analysis import formats

from . import COMMANDS, common


def register(sub):
    parser = sub.add_parser("run", help=COMMANDS["run"], description=__doc__.replace("``", ""), add_help=False)
    # optional to argparse, so that 'run --help' is help (exit 0); the workload requires it
    parser.add_argument("kernel", metavar="KERNEL", nargs="?", help=f"one of: {', '.join(kernels.names())}")
    common.add_ranks(parser)
    common.add_topology(parser)
    common.add_vms(parser)
    common.add_repeat(parser)
    common.add_store(parser)
    common.add_timeout(parser)
    common.add_bind(parser)
    common.add_rank_options(parser)
    common.add_mpi(parser)
    common.add_app(parser)
    common.add_profile(parser)
    parser.add_argument("--json", action="store_true", help="print the records as JSON Lines on stdout")
    parser.add_argument("--format", choices=formats.choices("run"), default="table",
                        help="table (with per-size rows) or osu: per-size rows in the OSU benchmarks' layout")
    parser.add_argument("-h", "--help", action="store_true", help="show help (with KERNEL: its options)")
    parser.set_defaults(func=handle, parser=parser, takes_extra=True)


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


def handle(args) -> int:
    from vnetbench import engine, workloads

    if args.help:
        print_help(args.parser, args.kernel)
        return 0
    from vnetbench import profile

    profile.check_mode(args.profile)  # before the workload's own checks: one bad option, one line
    workload = workloads.chosen(args.app, args.kernel, args.extra, typed=args.kernel)
    formats.check_run(args.format, workload.name)  # before anything runs

    def show(record):
        if args.json:
            print(json.dumps(record, sort_keys=True), flush=True)

    # with --json stdout is the records' alone: a program's own output goes to stderr
    records = engine.run(workload, args.ranks, topology=common.topology_arg(args), repeat=args.repeat,
                         store=args.store, timeout=args.timeout, bind=args.bind, mpi=args.mpi,
                         rank_options=common.rank_options(args), on_record=show, profile=args.profile,
                         echo=sys.stderr if args.json else sys.stdout)
    return common.finish(records, args.store, None if args.json else args.format)
