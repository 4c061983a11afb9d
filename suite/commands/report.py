"""``vnetbench report``: what a results store holds, as a table, markdown, csv or json."""

import sys
import warnings

from vnetbench.store import DEFAULT_PATH, Store


def register(sub):
    parser = sub.add_parser("report", help="summarise a results store", description=__doc__.strip("`"))
    parser.add_argument("--store", default=str(DEFAULT_PATH), metavar="PATH", help=f"(default {DEFAULT_PATH})")
    parser.add_argument("--format", choices=["table", "markdown", "csv", "json"], default="table")
    parser.set_defaults(func=handle)


def handle(args) -> int:
    from vnetbench import report

    store = Store(args.store)
    records, bad = store.scan()
    for item in bad:
        print(f"vnetbench: warning: {args.store}:{item.line}: skipped: {item.reason}", file=sys.stderr)
    if not records:
        print(f"vnetbench: {args.store} holds no records", file=sys.stderr)
        return 0
    with warnings.catch_warnings():
        print(report.render_records(records, args.format))
    return 0
