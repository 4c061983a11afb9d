"""``vnetbench calibrate --topology T``: measure T's paths (pingpong by size, allreduce by size and rank count) and
store the calibration as one record tied to T's spec, for ``vnetbench predict``."""

import sys

from . import COMMANDS, common


def register(sub):
    parser = sub.add_parser("calibrate", help=COMMANDS["calibrate"], description=__doc__.replace("``", ""))
    common.add_topology(parser)
    common.add_vms(parser)
    common.add_repeat(parser, default=1)
    common.add_store(parser)
    common.add_mpi(parser)
    parser.add_argument("--json", action="store_true", help="print the calibration record as JSON on stdout")
    parser.set_defaults(func=handle)


def handle(args) -> int:
    import json

    from vnetbench import topologies
    from vnetbench.core.store import Store, append_or_show
    from vnetbench.mpi import selection as mpiselect
    from vnetbench.predict import calibration

    topology = topologies.load(common.topology_arg(args))
    store = Store(args.store)
    store.check_writable()
    mpiselect.choose(args.mpi, None)  # no MPI, or one that cannot serve: refused before bring-up
    record = calibration.calibrate(topology, repeat=args.repeat, mpi=args.mpi)
    append_or_show(store, record)
    if args.json:
        print(json.dumps(record, sort_keys=True))
    else:
        print(text(record))
    print(f"vnetbench: calibration {record['run_id']} of {topology.name} appended to {args.store}", file=sys.stderr)
    if record["status"] != "ok":
        print(f"vnetbench: calibration failed: {record['validation']['detail']}", file=sys.stderr)
        return 1
    return 0


def text(record: dict) -> str:
    cal = record["calibration"]
    lines = [f"calibration of {cal['topology']} ({cal['mpi'] or 'MPI unknown'}), {cal['seconds']:.1f} s, "
             f"spec {cal['spec_hash']}"]
    for key, table in cal["paths"].items():
        small, large = table["sizes"][0], table["sizes"][-1]
        lines.append(f"  {key:<34} {table['describe']}: {small['oneway_us']:.2f} us @{small['bytes']} B, "
                     f"{large['bandwidth_mbps']:.0f} MB/s @{large['bytes']} B (ranks 0-{table['pair'][1]})")
    for ranks, table in cal["allreduce"].items():
        small, large = table["sizes"][0], table["sizes"][-1]
        lines.append(f"  allreduce x{ranks:<3} over {table['path']}: {small['us']:.2f} us @{small['bytes']} B, "
                     f"{large['us']:.0f} us @{large['bytes']} B")
    return "\n".join(lines)
