#!/usr/bin/env python3
"""What --profile costs: md and LAMMPS with and without the profiler, alternated, natively; prints the ratios.

    .venv/bin/python benchmarks/profile_cost.py                  # in.lj, 256,000 atoms, 100 steps, 2 ranks, 6 pairs
    .venv/bin/python benchmarks/profile_cost.py --cells 20 --repeat 6 --json

Each repetition runs both codes, each once plain and once with --profile (summary: the interposer preloaded into
every rank), the order of the plain and the profiled run flipped every repetition so that drift lands on both. md
runs through `vnetbench run md`, LAMMPS (Debian's lmp) through `vnetbench exec` (with --profile: `exec --profile
--store`), both under LAMMPS's MPI (md_common.same_mpi). The time is each code's step loop (md's elapsed_s,
LAMMPS's "Loop time"). The overhead is the best profiled sample over the best plain one, minus one (load elsewhere
only slows a run down, as in md_speed.py); beside it the same of the medians, the median of the per-repetition
ratios, and what the profiler itself estimated (the record's profile.cost.estimated_pct: its bookkeeping per
call, timed in the ranks, times its calls). On a shared machine the times swing by several times between runs;
two columns tell what was the profiler's and what was the others' work: the job's own CPU seconds (median,
profiled against plain: the ranks' work, which load elsewhere changes far less than their wall time) and the
share of the machine's CPU other work used during the runs (median, plain / profiled; vnetbench records both,
launch.host_load). Goal: under 3% for both. Exit 0 when met, 1 when not or a run failed, 2 when it cannot run.
"""

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from md_common import (BenchError, loadavg, retried, run_lammps, run_md, same_mpi, scratch, speed_args,  # noqa: E402
                       write_input)

GOAL_PCT = 3.0


def parse(argv):
    args = speed_args(argv, "profile_cost.py", __doc__.split("\n\n")[0], cells=40, cutoff=2.5, steps=100, repeat=6,
                      cells_help="256,000 atoms", cutoff_help=", LJ")
    if args.ranks == [1, 2]:  # speed_args's default; this benchmark is about 2 ranks
        args.ranks = [2]
    return args


def measure(args, log) -> dict:
    mpi = same_mpi()
    with scratch("profile-cost-") as tmp:
        infile, store = write_input(Path(tmp)), Path(tmp) / "results.jsonl"

        def one(code, ranks, profiled):
            if code == "md":
                record = run_md("native", ranks, args.cells, args.cutoff, args.steps, store, 1800, mpi,
                                extra=("--profile",) if profiled else ())
                seconds = record["metrics"]["elapsed_s"]
            else:  # both sides stored (exec --record): the same path, and each run's CPU seconds
                out = run_lammps("native", ranks, args.cells, args.cutoff, args.steps, infile, 1800, mpi,
                                 extra=("--profile" if profiled else "--record", "--store", str(store)))
                record, seconds = json.loads(store.read_text().splitlines()[-1]), out["loop_s"]
            load = record["launch"].get("host_load") or {}
            return {"seconds": seconds, "estimated_pct": _estimated(record) if profiled else None,
                    "own_cpu_s": load.get("own_cpu_s"), "foreign_share": load.get("foreign_share")}

        samples = {ranks: {code: {"plain": [], "profiled": []} for code in ("md", "lammps")} for ranks in args.ranks}
        for rep in range(args.repeat):
            for ranks in args.ranks:
                for code in ("md", "lammps"):
                    for profiled in ((False, True) if rep % 2 == 0 else (True, False)):
                        load = loadavg()
                        sample = {**retried(lambda: one(code, ranks, profiled), log), "loadavg_before": load}
                        samples[ranks][code]["profiled" if profiled else "plain"].append(sample)
                        log(f"rep {rep + 1}, {ranks} ranks, {code}{' --profile' if profiled else ''}: "
                            f"{sample['seconds']:.3f} s (load {load:.2f})")
    rows = []
    for ranks in args.ranks:
        for code in ("md", "lammps"):
            plain = [s["seconds"] for s in samples[ranks][code]["plain"]]
            profiled = [s["seconds"] for s in samples[ranks][code]["profiled"]]
            best = 100 * (min(profiled) / min(plain) - 1)
            pooled = 100 * (statistics.median(profiled) / statistics.median(plain) - 1)
            paired = 100 * (statistics.median(p / q for p, q in zip(profiled, plain)) - 1)
            estimated = [s["estimated_pct"] for s in samples[ranks][code]["profiled"] if s["estimated_pct"] is not None]
            cpu = {side: statistics.median(s["own_cpu_s"] for s in samples[ranks][code][side])
                   for side in ("plain", "profiled")}
            foreign = {side: statistics.median(s["foreign_share"] for s in samples[ranks][code][side])
                       for side in ("plain", "profiled")}
            rows.append({"code": code, "ranks": ranks, "plain_s": min(plain), "profiled_s": min(profiled),
                         "overhead_pct": best, "median_pct": pooled, "paired_pct": paired,
                         "cpu_pct": 100 * (cpu["profiled"] / cpu["plain"] - 1), "foreign_share": foreign,
                         "estimated_pct": statistics.median(estimated) if estimated else None,
                         "met": best < GOAL_PCT})
    return {"problem": {"cells": args.cells, "atoms": 4 * args.cells ** 3, "cutoff": args.cutoff, "steps": args.steps},
            "mpi": mpi, "goal_pct": GOAL_PCT, "rows": rows, "samples": samples}


def _estimated(record) -> float | None:
    profile = (record or {}).get("profile") or {}
    if profile.get("status") != "ok":
        raise BenchError(f"the profiled run has no whole profile: {profile.get('reason')}")
    return profile["cost"]["estimated_pct"]


def main(argv=None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    started = time.time()
    try:
        result = measure(args, lambda text: print(f"profile_cost: {text}", file=sys.stderr, flush=True))
    except (BenchError, OSError) as exc:
        print(f"profile_cost: error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, OSError) else 1
    result["duration_s"] = round(time.time() - started, 1)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        p = result["problem"]
        print(f"--profile's cost: {p['atoms']} atoms, cutoff {p['cutoff']}, {p['steps']} steps, natively; best of "
              f"{args.repeat} alternated pairs; {result['duration_s']:.0f} s")
        print("| code | ranks | plain s | --profile s | overhead | of medians | per-pair median | job CPU s | "
              "others' CPU share | profiler's estimate | goal < 3% |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for row in result["rows"]:
            estimate = "-" if row["estimated_pct"] is None else f"{row['estimated_pct']:.3f}%"
            foreign = row["foreign_share"]
            print(f"| {row['code']} | {row['ranks']} | {row['plain_s']:.3f} | {row['profiled_s']:.3f} | "
                  f"{row['overhead_pct']:+.2f}% | {row['median_pct']:+.2f}% | {row['paired_pct']:+.2f}% | "
                  f"{row['cpu_pct']:+.2f}% | {foreign['plain']:.2f} / {foreign['profiled']:.2f} | {estimate} | "
                  f"{'met' if row['met'] else 'MISSED'} |")
    return 0 if all(row["met"] for row in result["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
