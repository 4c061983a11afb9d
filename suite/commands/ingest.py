"""``vnetbench ingest FILE... --store PATH``: add records from direct launches (``--record FILE``)."""

import sys

from vnetbench.errors import UsageError
from vnetbench.store import DEFAULT_PATH, BadLine, Store


def register(sub):
    parser = sub.add_parser("ingest", help="add records written by a direct mpirun launch to a store",
                            description=__doc__.strip("`"))
    parser.add_argument("files", nargs="+", metavar="FILE", help="record files (one JSON record per line)")
    parser.add_argument("--store", default=str(DEFAULT_PATH), metavar="PATH", help=f"(default {DEFAULT_PATH})")
    parser.set_defaults(func=handle)


def load_records(paths: list[str]) -> list[dict]:
    """Every record in the files; UsageError naming the file and line of the first bad one."""
    records = []
    for path in paths:
        for entry in Store(path).entries("FILE"):
            if isinstance(entry, BadLine):
                raise UsageError(f"{path}:{entry.line}: {entry.reason}; expected one vnetbench record per line")
            records.append(entry[1])
    return records


def handle(args) -> int:
    store = Store(args.store)
    store.check_writable()
    records = load_records(args.files)
    seen = set()
    if store.path.exists():
        seen = {(r["run_id"], r["repetition"]) for r in store.scan()[0]}
    added = 0
    for record in records:
        key = (record["run_id"], record["repetition"])
        if key in seen:
            print(f"vnetbench: run {record['run_id']} repetition {record['repetition']} is already in "
                  f"{args.store}; skipped", file=sys.stderr)
            continue
        store.append(record)
        seen.add(key)
        added += 1
    print(f"vnetbench: {added} record(s) added to {args.store}", file=sys.stderr)
    return 0
