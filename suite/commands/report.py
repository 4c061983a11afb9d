"""``vnetbench report``: a store as the study's tables - topologies x rank counts, overhead, scaling, noise.

Each cell is the median over repetitions of a configuration's table metric (as each kernel
declares: elapsed time, bandwidth, latency at the smallest and bandwidth at the largest
size), with its spread and repetitions; beside it the overhead against --baseline at each
rank count (N/A where one side had more ranks than cpus), speedup and parallel efficiency
between rank counts, and each cell's coefficient of variation. Lines of the store that
cannot be read, and records whose metrics are not numbers, are named in a warning.
"""

import sys

from vnetbench.analysis import formats
from vnetbench.core.errors import UsageError
from vnetbench.core.store import DEFAULT_PATH

from . import COMMANDS


def register(sub):
    parser = sub.add_parser("report", help=COMMANDS["report"], description=__doc__.replace("``", ""))
    parser.add_argument("--store", default=str(DEFAULT_PATH), metavar="PATH", help=f"(default {DEFAULT_PATH})")
    parser.add_argument("--baseline", default="native", metavar="TOPOLOGY",
                        help="topology that overhead is measured against (default native)")
    parser.add_argument("--format", choices=formats.choices("report"), default="table")
    parser.add_argument("--runs", action="store_true", help="one row per record instead of the study's tables")
    parser.add_argument("--sizes", metavar="RUN_ID", help="the per-size table of the records of one run "
                        "(kernels and applications that measure per message size: latency, bandwidth, spread)")
    formats.add_written(parser, "report")  # --plot FILE.png, --html FILE
    parser.set_defaults(func=handle)


def handle(args) -> int:
    from vnetbench.analysis import digest, report

    written = formats.asked(args, "report")  # each checked before the store is read
    # the store is streamed into the tables; records are kept only where they are shown
    if args.runs:
        keep = (lambda record: True)
    elif args.sizes:
        keep = (lambda record: record["run_id"] == args.sizes)
    else:
        keep = digest.passing if written else None
    read = digest.digest(args.store, "--store", keep=keep, whole=args.runs)
    loaded = read.loaded
    for warning in loaded.warnings():
        print(f"vnetbench: warning: {warning}", file=sys.stderr)
    for item in read.not_numbers:
        print(f"vnetbench: warning: metrics not numbers, left out: {item}", file=sys.stderr)
    if not loaded.count:
        print(f"vnetbench: {args.store} holds no records", file=sys.stderr)
        return 0
    if args.sizes:
        if not read.kept:
            raise UsageError(f"--sizes: no run {args.sizes!r} in {args.store}; 'vnetbench report --runs --format json' "
                             "lists the run ids")
        document = report.sizes_document(read.kept)
        if not document.grids:
            raise UsageError(f"--sizes: run {args.sizes!r} ({read.kept[0]['kernel']}) has no per-size table")
        print(formats.render(args.format, document))
        return 0
    if args.runs:
        print(report.render_records(read.kept, args.format))
        return 0
    tables = read.study.build(args.baseline)
    context = {"store": str(loaded.path), "baseline": args.baseline, "records": loaded.count,
               "not_ok": loaded.not_ok,
               "skipped_lines": [{"line": s.line, "reason": s.reason} for s in loaded.skipped],
               "unmeasured": read.study.unmeasured(), "unconfined": read.study.unconfined(),
               "not_numbers": read.not_numbers,
               "breakdowns": read.breakdowns.rows(), "profiles": read.profiles.rows,
               "predictions": read.predictions.rows()}
    print(report.render_study(tables, args.format, **context))
    for module, path in written:
        what = module.write_report(path, read.kept, tables, context)
        print(f"vnetbench: {what} written to {path}", file=sys.stderr)
    return 0
