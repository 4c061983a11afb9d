"""``vnetbench predict --profile RUN_ID --topology T``: the profiled program's elapsed time and overhead on T,
predicted by replaying its trace over T's calibration and over its own topology's, with a breakdown: which
calls, how many bytes, over which path, how much overlapped with computation. A topology without a calibration
of its own is extrapolated from calibrations of its parts, and says so. Nothing is started."""

import json

from . import COMMANDS, common


def register(sub):
    parser = sub.add_parser("predict", help=COMMANDS["predict"], description=__doc__.replace("``", ""))
    parser.add_argument("--profile", required=True, metavar="RUN_ID",
                        help="a run profiled with --profile trace: RUN_ID, RUN_ID:REPETITION, or 'last' (the store's latest)")
    common.add_topology(parser, required=True)
    common.add_vms(parser)
    common.add_store(parser, help="results store holding the profiled run and the calibrations")
    parser.add_argument("--program", metavar="NAME",
                        help="refuse a profile of another program (a kernel's or application's name, or an exec'd "
                             "program's file name)")
    parser.add_argument("--ranks", type=int, metavar="N", help="refuse a profile of another rank count")
    parser.add_argument("--json", action="store_true", help="print the prediction as one JSON object")
    parser.add_argument("--no-record", action="store_true",
                        help="do not store the prediction (report shows stored predictions beside measured runs)")
    parser.set_defaults(func=handle)


def handle(args) -> int:
    from vnetbench.core.store import Store
    from vnetbench.analysis import predictions
    from vnetbench.predict import forecast, paths

    store = Store(args.store)
    records = store.read() if store.path.is_file() else []
    record = forecast.profile_record(records, args.profile, args.store)
    forecast.check_identity(record, args.program, args.ranks)
    target = paths.load_topology(common.topology_arg(args))
    trace = forecast.whole_trace(record, store.path)
    result = forecast.predict(records, record, target, trace)
    if not args.no_record:
        store.append(predictions.prediction_record(record, target, result))
    print(json.dumps(result, sort_keys=True) if args.json else text(result))
    return 0


def _pct(value) -> str:
    return "?" if value is None else f"{value:+.1f}%"


def text(p: dict) -> str:
    how = ""
    if p["extrapolated"]:
        how = f" [extrapolated from calibration(s) {', '.join(p['rests_on']['topology'])}]"
    lines = [f"{p['program']} x{p['ranks']} on {p['topology']}: predicted {p['elapsed_s']:.4g} s, "
             f"{_pct(p['overhead_pct'])} against {p['baseline_topology']}'s measured {p['baseline_elapsed_s']:.4g} s"
             f"{how}",
             f"model on {p['baseline_topology']} itself: replay {p['replay']['baseline_s']:.4g} s against measured "
             f"{p['baseline_elapsed_s']:.4g} s ({_pct(p['replay']['self_error_pct'])})", "", "paths:"]
    for key, path in p["paths"].items():
        lines.append(f"  {key}: {path['describe']} - {path['how']}")
    lines += ["", f"  {'call':<18}{'calls':>9}{'bytes':>14}{'s on target':>13}{'s on baseline':>15}"]
    for call, row in sorted(p["breakdown"]["calls"].items(), key=lambda kv: -kv[1]["seconds"]):
        lines.append(f"  {call:<18}{row['calls']:>9}{row['bytes']:>14}{row['seconds']:>13.4f}"
                     f"{row['baseline_seconds']:>15.4f}")
    lines += ["", f"  {'path':<34}{'messages':>10}{'bytes':>14}{'in flight s':>13}{'overlapped s':>14}"
                  f"{'collectives s':>15}"]
    for key, row in p["breakdown"]["paths"].items():
        lines.append(f"  {key:<34}{row['messages']:>10}{row['bytes']:>14}{row['transfer_s']:>13.4f}"
                     f"{row['overlapped_s']:>14.4f}{row.get('collective_s', 0.0):>15.4f}")
    lines.append(f"\n  computation per rank: {p['breakdown']['compute_s_per_rank']:.4g} s (as profiled); seconds are "
                 f"summed over ranks")
    return "\n".join(lines)
