"""``vnetbench exec --topology NAME|FILE --ranks N -- PROGRAM [ARGS]``: any MPI program on a topology.

The program (an OSU benchmark, an MD code, ...) is launched the way vnetbench launches its own
kernels: each rank inside its VM, mapped as the spec says, TCP on the topology's subnet. Its
output passes through unchanged. The topology is brought up for the run (and taken down after)
unless it is already up. Exit 0 when the program succeeds, 1 when it fails or times out, or when
its ranks ran as singletons of another MPI (the world-size guard of ``run --app``: every exec run
is judged as the one --record stores). With --record the run is also stored as a record, as
``run --app`` stores one (--parser reads its metrics with a built-in parser). --profile implies --record: the profile is kept in the record.
"""

import argparse
import shlex
import sys

from vnetbench.core.errors import UsageError

from . import COMMANDS, common


def register(sub):
    parser = sub.add_parser("exec", help=COMMANDS["exec"], description=__doc__.replace("``", ""))
    common.add_topology(parser, required=True)
    common.add_vms(parser)
    common.add_ranks(parser, required=True)
    common.add_bind(parser)
    common.add_timeout(parser, default="none")
    parser.add_argument("--show", action="store_true", help="print the launcher's command on stderr first")
    parser.add_argument("--record", action="store_true",
                        help="store the run as a record (elapsed time, exit status, output tail, placement)")
    common.add_store(parser, default=False, help="with --record: results store")
    parser.add_argument("--parser", metavar="NAME", help=common.Shown(_parsers_help))
    common.add_mpi(parser)
    common.add_profile(parser)
    parser.add_argument("program", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS]")
    parser.set_defaults(func=handle)


def _parsers_help() -> str:
    # the applications' package imports its pydantic model (about 70 ms): only for help, not for every exec
    from vnetbench.apps.parsers import PARSERS

    return f"with --record: read metrics with a built-in parser ({', '.join(PARSERS)})"


def handle(args) -> int:
    from vnetbench import engine

    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        raise UsageError("PROGRAM: missing; give it after '--', e.g. vnetbench exec --topology 2vm-2vswitch "
                         "--ranks 2 -- ./osu_latency")
    from vnetbench import profile

    profile.check_mode(args.profile)
    if args.profile:
        args.record = True  # the profile lives in the run's record
    if not args.record and (args.store or args.parser):
        raise UsageError(f"{'--store' if args.store else '--parser'}: only with --record")
    if args.record:
        return record(args, program)

    def on_launch(argv, notes):
        if args.show:
            print(f"vnetbench: {shlex.join(argv)}", file=sys.stderr)
        if "yield_when_idle" in notes:
            print(f"vnetbench: mpi_yield_when_idle=1: {notes['yield_when_idle']}", file=sys.stderr)

    from vnetbench.workloads.app import AppWorkload

    # the run exec --record makes, through the same loop, its record kept by no store: the exit code says how it went
    (done,) = engine.run(AppWorkload.of_program(program), args.ranks, topology=common.topology_arg(args),
                         timeout=args.timeout, bind=args.bind, mpi=args.mpi, echo=sys.stdout, submit=False,
                         on_launch=on_launch)
    if done["status"] == "ok":
        return 0
    status = done.get("exit_status")
    if done["status"] == "timeout":
        print(f"vnetbench: error: {program[0]} was killed after {args.timeout:g} s", file=sys.stderr)
    elif status and done["status"] == "failed" and "exited with status" in done["validation"]["detail"]:
        print(f"vnetbench: error: {program[0]} exited with status {status}: {done['validation']['detail'][:500]}",
              file=sys.stderr)
    else:
        print(f"vnetbench: error: {done['validation']['detail'][:500]}", file=sys.stderr)
    return 1


def record(args, program: list[str]) -> int:
    """``exec ... --record [--store S] [--parser NAME] -- PROGRAM``: the run, stored as one record."""
    from vnetbench import engine
    from vnetbench.core.store import DEFAULT_PATH
    from vnetbench.workloads.app import AppWorkload

    store = args.store or str(DEFAULT_PATH)
    # exec runs here, on the topology brought up for it: never as a scheduler's batch job
    records = engine.run(AppWorkload.of_program(program, args.parser), args.ranks,
                         topology=common.topology_arg(args), store=store, timeout=args.timeout, bind=args.bind,
                         mpi=args.mpi, echo=sys.stdout, submit=False, profile=args.profile)
    return common.finish(records, store, "table")
