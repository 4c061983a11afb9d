#!/usr/bin/env python3
"""md's speed beside LAMMPS (Debian's lmp, lj/cut) on the same problem, in the same run; prints ratios.

    .venv/bin/python benchmarks/md_speed.py                 # in.lj, 256,000 atoms, 100 steps, 1 and 2 ranks, 3 reps
    .venv/bin/python benchmarks/md_speed.py --cells 20 --repeat 5
    .venv/bin/python benchmarks/md_speed.py --json

Both run natively through vnetbench (md with `vnetbench run`, LAMMPS with `vnetbench exec`, the
same binding and the same MPI, LAMMPS's: md_common.same_mpi), alternating, the order flipped every
repetition; the best repetition of each side counts (load elsewhere only slows a run down). Speed
is atom-steps per second of the step loop (set-up excluded on both sides). Goal: md at least 0.8 of
LAMMPS at every rank count.
Exit 0 when the goal is met, 1 when not or a run failed, 2 when it cannot run.
"""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from md_common import (BenchError, alternated, run_lammps, run_md, same_mpi, scratch, speed_args,  # noqa: E402
                       write_input)

GOAL = 0.8


def parse(argv):
    return speed_args(argv, "md_speed.py", __doc__.split("\n\n")[0], cells=40, cutoff=2.5, steps=100, repeat=3,
                      cells_help="256,000 atoms", cutoff_help=", LJ")


def measure(args, log) -> dict:
    mpi = same_mpi()
    with scratch("md-speed-") as tmp:
        infile, store = write_input(Path(tmp)), Path(tmp) / "results.jsonl"

        def run_side(side, ranks):
            if side == "md":
                m = run_md("native", ranks, args.cells, args.cutoff, args.steps, store, 1800, mpi)["metrics"]
                return {"rate": m["atom_steps_per_s"]}
            out = run_lammps("native", ranks, args.cells, args.cutoff, args.steps, infile, 1800, mpi)
            return {"rate": out["atoms"] * out["steps"] / out["loop_s"]}

        samples = alternated(args, run_side, log)
    rows = []
    for ranks in args.ranks:
        best = {side: max(s["rate"] for s in samples[ranks][side]) for side in ("md", "lammps")}
        ratio = best["md"] / best["lammps"]
        rows.append({"ranks": ranks, "md": best["md"], "lammps": best["lammps"], "ratio": ratio,
                     "met": ratio >= GOAL})
    return {"problem": {"cells": args.cells, "atoms": 4 * args.cells ** 3, "cutoff": args.cutoff,
                        "steps": args.steps}, "mpi": mpi, "goal": GOAL, "rows": rows, "samples": samples}


def main(argv=None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    started = time.time()
    try:
        result = measure(args, lambda text: print(f"md_speed: {text}", file=sys.stderr, flush=True))
    except (BenchError, OSError) as exc:
        print(f"md_speed: error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, OSError) else 1
    result["duration_s"] = round(time.time() - started, 1)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        p = result["problem"]
        print(f"md vs LAMMPS lj/cut: {p['atoms']} atoms, cutoff {p['cutoff']}, {p['steps']} steps; best of "
              f"{args.repeat} alternating repetitions; {result['duration_s']:.0f} s")
        print("| ranks | LAMMPS Matom-steps/s | md Matom-steps/s | md / LAMMPS | goal >= 0.8 |")
        print("|---|---|---|---|---|")
        for row in result["rows"]:
            print(f"| {row['ranks']} | {row['lammps'] / 1e6:.3f} | {row['md'] / 1e6:.3f} | {row['ratio']:.2f} | "
                  f"{'met' if row['met'] else 'MISSED'} |")
    return 0 if all(row["met"] for row in result["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
