"""``vnetbench report``: a store as the study's tables - topologies x rank counts, overhead, scaling, noise.

Each cell is the median over repetitions of a configuration's headline metric (elapsed time
for halo, bandwidth for stream, latency and bandwidth for pingpong and allreduce), with its
spread and repetitions; beside it the overhead against --baseline at each rank count,
speedup and parallel efficiency between rank counts, and each cell's coefficient of
variation. Lines of the store that cannot be read are skipped with a warning naming them.
"""

import sys

from vnetbench.errors import UsageError
from vnetbench.store import DEFAULT_PATH


def register(sub):
    parser = sub.add_parser("report", help="the study's tables from a results store",
                            description=__doc__.replace("``", ""))
    parser.add_argument("--store", default=str(DEFAULT_PATH), metavar="PATH", help=f"(default {DEFAULT_PATH})")
    parser.add_argument("--baseline", default="native", metavar="TOPOLOGY",
                        help="topology that overhead is measured against (default native)")
    parser.add_argument("--format", choices=["table", "markdown", "csv", "json"], default="table")
    parser.add_argument("--runs", action="store_true", help="one row per record instead of the study's tables")
    parser.add_argument("--plot", metavar="FILE.png", help="also draw the plots into FILE.png (matplotlib)")
    parser.add_argument("--html", metavar="FILE", help="also write one self-contained HTML page with tables and plots")
    parser.set_defaults(func=handle)


def _check_output(option: str, path: str | None, suffixes: tuple[str, ...]) -> None:
    from pathlib import Path

    if path is None:
        return
    target = Path(path)
    if target.suffix.lower() not in suffixes:
        raise UsageError(f"{option}: {path} should end in {' or '.join(suffixes)}")
    if target.is_dir() or not target.parent.is_dir():
        raise UsageError(f"{option}: cannot write {path}: {'it is a directory' if target.is_dir() else 'no such folder'}")


def handle(args) -> int:
    from vnetbench import breakdown, report, results, summary

    _check_output("--plot", args.plot, (".png", ".svg", ".pdf"))
    _check_output("--html", args.html, (".html", ".htm"))
    loaded = results.load(args.store, "--store")
    for warning in loaded.warnings():
        print(f"vnetbench: warning: {warning}", file=sys.stderr)
    if not loaded.records:
        print(f"vnetbench: {args.store} holds no records", file=sys.stderr)
        return 0
    if args.runs:
        print(report.render_records(loaded.records, args.format))
        return 0
    tables = summary.build(loaded.records, args.baseline)
    context = {"store": str(loaded.path), "baseline": args.baseline, "records": len(loaded.records),
               "not_ok": len(loaded.records) - len(loaded.ok()),
               "skipped_lines": [{"line": s.line, "reason": s.reason} for s in loaded.skipped],
               "unmeasured": summary.unmeasured(loaded.records),
               "stream_breakdown": breakdown.stream(loaded.ok())}
    print(report.render_study(tables, args.format, **context))
    if args.plot:
        from vnetbench import plots

        drawn = plots.save(loaded.ok(), tables, args.plot, baseline=args.baseline)
        print(f"vnetbench: {drawn} plot(s) written to {args.plot}", file=sys.stderr)
    if args.html:
        from vnetbench import html

        html.write(args.html, loaded.ok(), tables, **context)
        print(f"vnetbench: report written to {args.html}", file=sys.stderr)
    return 0
