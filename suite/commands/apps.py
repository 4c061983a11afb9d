"""The application side of ``run --app``, ``sweep --app`` and ``exec --record``: an MPI program as a run.

The commands parse their options as for kernels and hand over here when an application is
named; records go to the store as a kernel's do, and the exit code follows their status.
"""

import json
import sys

from vnetbench.errors import UsageError


def add_app_option(parser) -> None:
    parser.add_argument("--app", metavar="FILE.yaml",
                        help="run a real application defined in FILE.yaml (command, parser, success, metrics) "
                             "instead of a kernel")


def run(args) -> int:
    """``vnetbench run --app FILE.yaml``."""
    from vnetbench import apps
    from vnetbench.apps.run import run_app

    from .run import topology_of

    if args.kernel is not None or args.extra:
        raise UsageError(f"--app: runs the application instead of a kernel; drop "
                         f"{args.kernel or ' '.join(args.extra)!r}")
    refuse_kernel_options(args)
    if args.format != "table":
        raise UsageError(f"--format {args.format}: for kernels with per-size rows; an application's run prints a table")
    app = apps.load(args.app)

    def show(record):
        if args.json:
            print(json.dumps(record, sort_keys=True), flush=True)

    # with --json stdout is the records' alone: the program's output goes to stderr
    records = run_app(app, args.ranks, topology=topology_of(args), repeat=args.repeat, store=args.store,
                      timeout=args.timeout, bind=args.bind, mpi=args.mpi, on_record=show,
                      echo=sys.stderr if args.json else sys.stdout)
    return _finish(records, args.store, not args.json)


def refuse_kernel_options(args) -> None:
    """The kernels' rank-side options (--mem-policy, --counters, ...) cannot reach an application's ranks."""
    from vnetbench.kernels import RANK_OPTIONS

    given = [key for key in RANK_OPTIONS if getattr(args, key, None)]
    if given:
        raise UsageError(f"--{given[0].replace('_', '-')}: a kernel option; an application sets its own "
                         f"(its command and env)")


def sweep(args) -> int:
    """``vnetbench sweep --app FILE.yaml [--study S] [--topologies A,B] [--ranks 2,4] [--repeat R]``."""
    from vnetbench import apps, studies
    from vnetbench import sweep as sweeps
    from vnetbench.store import Store

    from .run import rank_options
    from .sweep import run_plan

    if args.kernel or args.extra:
        raise UsageError(f"--app: runs the application instead of a kernel; drop "
                         f"{'--kernel ' + args.kernel if args.kernel else ' '.join(args.extra)!r}")
    refuse_kernel_options(args)
    app = apps.load(args.app)
    base = studies.get(args.study or "quick")
    args.topologies, args.ranks = args.topologies or base.topologies, args.ranks or base.ranks
    store = Store(args.store)
    store.check_writable()
    plan = sweeps.plan(app.name, None, args.topologies, args.ranks, args.repeat or base.repeat, bind=args.bind,
                       run_options=rank_options(args), timeout=args.timeout, store=store, resume=args.resume,
                       optional_topologies=args.study is not None, mpi=args.mpi, app=app)
    return run_plan(args, base, plan, args.topologies, args.ranks, store)


def record_exec(args, program: list[str]) -> int:
    """``vnetbench exec ... --record [--store S] [--parser NAME] -- PROGRAM``: the run, stored as one record."""
    from vnetbench import apps
    from vnetbench.apps.run import run_app
    from vnetbench.store import DEFAULT_PATH

    app = apps.adhoc(program, args.parser)
    records = run_app(app, args.ranks, topology=args.topology, store=args.store or str(DEFAULT_PATH),
                      timeout=args.timeout, bind=args.bind, mpi=args.mpi, echo=sys.stdout)
    return _finish(records, args.store or str(DEFAULT_PATH), True)


def _finish(records: list[dict], store: str, table: bool) -> int:
    from vnetbench.analysis import report

    if table:
        print(report.run_text(records, "table"))
    for record in records:
        if record["status"] != "ok":
            print(f"vnetbench: {record['kernel']} repetition {record['repetition'] + 1}: {record['status']}: "
                  f"{record['validation']['detail'][:500]}", file=sys.stderr)
    print(f"vnetbench: {len(records)} record(s) appended to {store}", file=sys.stderr)
    return 0 if all(record["status"] == "ok" for record in records) else 1
