"""``vnetbench ingest FILE... --store PATH``: add records from direct launches (``--record FILE``)."""

import sys

from vnetbench.core.store import DEFAULT_PATH, Store

from . import COMMANDS


def register(sub):
    parser = sub.add_parser("ingest", help=COMMANDS["ingest"], description=__doc__.replace("``", ""))
    parser.add_argument("files", nargs="+", metavar="FILE", help="record files (one JSON record per line)")
    parser.add_argument("--store", default=str(DEFAULT_PATH), metavar="PATH", help=f"(default {DEFAULT_PATH})")
    parser.set_defaults(func=handle)


def handle(args) -> int:
    from vnetbench.engine.ingest import ingest

    added, skipped = ingest(args.files, Store(args.store))
    for record in skipped:
        print(f"vnetbench: run {record['run_id']} repetition {record['repetition']} is already in "
              f"{args.store}; skipped", file=sys.stderr)
    print(f"vnetbench: {added} record(s) added to {args.store}", file=sys.stderr)
    return 0
