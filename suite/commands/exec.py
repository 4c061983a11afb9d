"""``vnetbench exec --topology NAME|FILE --ranks N -- PROGRAM [ARGS]``: any MPI program on a topology.

The program (an OSU benchmark, an MD code, ...) is launched the way vnetbench launches its own
kernels: each rank inside its VM, mapped as the spec says, TCP on the topology's subnet. Its
output passes through unchanged. The topology is brought up for the run (and taken down after)
unless it is already up. Exit 0 when the program succeeds, 1 when it fails or times out.
With --record the run is also stored as a record, as ``run --app`` stores one (--parser reads
its metrics: osu, imb or lammps).
"""

import argparse
import shlex
import sys

from vnetbench.errors import UsageError
from vnetbench.options import float_range, int_range
from vnetbench.topologies.base import MAX_RANKS


def register(sub):
    parser = sub.add_parser("exec", help="run any MPI program on a topology", description=__doc__.replace("``", ""))
    parser.add_argument("--topology", required=True, metavar="NAME|FILE", help="preset name or topology YAML")
    parser.add_argument("--ranks", type=int_range(1, MAX_RANKS), required=True, metavar="N", help="MPI ranks")
    parser.add_argument("--bind", choices=["core", "none"],
                        help="bind ranks to cores (native only; VMs' ranks run on their vCPUs)")
    parser.add_argument("--timeout", type=float_range(0.001), metavar="S",
                        help="seconds after which the job is killed (default: none)")
    parser.add_argument("--show", action="store_true", help="print the mpirun command on stderr first")
    parser.add_argument("--record", action="store_true",
                        help="store the run as a record (elapsed time, exit status, output tail, placement)")
    parser.add_argument("--store", metavar="PATH", help="with --record: results store (default as run's)")
    parser.add_argument("--parser", metavar="NAME", help="with --record: read metrics with a built-in parser "
                                                         "(osu, imb, lammps)")
    from vnetbench import mpiselect

    mpiselect.add_option(parser)
    parser.add_argument("program", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS]")
    parser.set_defaults(func=handle)


def handle(args) -> int:
    from vnetbench import jobs, launch, mpiselect, topologies
    from vnetbench.records import new_run_id

    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        raise UsageError("PROGRAM: missing; give it after '--', e.g. vnetbench exec --topology 2vm-2vswitch "
                         "--ranks 2 -- ./osu_latency")
    if not args.record and (args.store or args.parser):
        raise UsageError(f"{'--store' if args.store else '--parser'}: only with --record")
    if args.record:
        from . import apps

        return apps.record_exec(args, program)
    # the launcher, and a program it cannot start as one job refused, before bring-up
    launcher, _ = mpiselect.choose(args.mpi, program[0])
    topology = topologies.load(args.topology)
    with topologies.realise(topology) as realised:
        realised.check_ranks(args.ranks)
        spec = realised.launch(args.ranks, args.bind)
        argv = launch.mpirun_argv(spec, program, launcher)
        if args.show:
            print(f"vnetbench: {shlex.join(argv)}", file=sys.stderr)
        for key, why in spec.notes.items():
            if key == "yield_when_idle":
                print(f"vnetbench: mpi_yield_when_idle=1: {why}", file=sys.stderr)
        with jobs.Job(new_run_id(), realised.health) as job:
            outcome = launch.execute(argv, launch.launcher_env(spec, launcher), args.timeout,
                                     passthrough=sys.stdout, collect_records=False, job=job)
    if job.problem:
        print(f"vnetbench: error: {job.problem['detail']}", file=sys.stderr)
        return 1
    if outcome.timed_out:
        print(f"vnetbench: error: {program[0]} was killed after {args.timeout:g} s", file=sys.stderr)
        return 1
    if outcome.returncode != 0:
        print(f"vnetbench: error: {program[0]} exited with status {outcome.returncode}", file=sys.stderr)
        return 1
    return 0
