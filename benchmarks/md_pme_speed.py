#!/usr/bin/env python3
"""md with PME beside LAMMPS with PPPM (Debian's lmp: lj/cut/coul/long + kspace_style pppm) on the same charged
problem, in the same run; prints atom-steps per second and their ratio at each rank count.

    .venv/bin/python benchmarks/md_pme_speed.py              # 131,072 atoms, cutoff 5.8, 20 steps, 1 and 2 ranks
    .venv/bin/python benchmarks/md_pme_speed.py --cells 24 --repeat 3 --json

The problem is md's stmv physics at an eighth of its size: fcc at 0.8442, the charges md puts on the lattice
(+1 -1 -1 +1 on the four basis sites: LAMMPS's fcc basis is md's, so `create_atoms ... basis` gives the same
arrangement), cutoff 5.8 for Lennard-Jones and real-space Coulomb, Ewald splitting and grid from md's defaults
(erfc(beta rc) = 1e-5, spacing 0.12 rc) handed to LAMMPS (`kspace_modify mesh ... order 4 gewald BETA`), so both
codes use the same grid, order and splitting. LAMMPS differentiates analytically (`diff ad`, one forward and
one inverse FFT per evaluation, as smooth PME); its PPPM influence function is its own. Both evaluate the
long-range part every step (md's --pme-every 1). The step-0 Coulomb energy per atom of both is printed: the
same arrangement gives the same value to the grid's accuracy.

Both run natively through vnetbench under LAMMPS's MPI (md_common.same_mpi), alternating, the order flipped
every repetition; the best repetition of each side counts. Goal: md at least 0.7 of LAMMPS at every rank count.
Exit 0 when the goal is met, 1 when not or a run failed, 2 when it cannot run.
"""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from md_common import (IN_PME, BenchError, alternated, pme_problem, run_lammps_pme, run_md_pme,  # noqa: E402
                       same_mpi, scratch, speed_args)

GOAL = 0.7

def parse(argv):
    return speed_args(argv, "md_pme_speed.py", __doc__.split("\n\n")[0], cells=32, cutoff=5.8, steps=20, repeat=2,
                      cells_help="131,072 atoms", cutoff_help=", md's stmv")


def measure(args, log) -> dict:
    p = pme_problem(args.cells, args.cutoff, args.steps)
    mpi = same_mpi()
    with scratch("md-pme-speed-") as tmp:
        infile, store = Path(tmp) / "in.pme", Path(tmp) / "results.jsonl"
        infile.write_text(IN_PME)

        def run_side(side, ranks):
            out = run_md_pme("native", ranks, p, store, mpi) if side == "md" else \
                run_lammps_pme("native", ranks, p, infile, mpi)
            return {**out, "detail": f", long-range {out['long_s']:.2f} s, pairs {out['pair_s']:.2f} s"}

        samples = alternated(args, run_side, log)
    rows = []
    for ranks in args.ranks:
        best = {side: max(samples[ranks][side], key=lambda s: s["rate"]) for side in ("md", "lammps")}
        ratio = best["md"]["rate"] / best["lammps"]["rate"]
        rows.append({"ranks": ranks, "md": best["md"]["rate"], "lammps": best["lammps"]["rate"], "ratio": ratio,
                     "md_long_s": best["md"]["long_s"], "lammps_long_s": best["lammps"]["long_s"],
                     "md_pair_s": best["md"]["pair_s"], "lammps_pair_s": best["lammps"]["pair_s"],
                     "met": ratio >= GOAL})
    coul = {side: samples[args.ranks[0]][side][0]["coul0"] for side in ("md", "lammps")}
    return {"problem": p, "mpi": mpi, "goal": GOAL, "rows": rows, "coulomb_at_step_0": coul, "samples": samples}


def main(argv=None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    started = time.time()
    try:
        result = measure(args, lambda text: print(f"md_pme_speed: {text}", file=sys.stderr, flush=True))
    except (BenchError, OSError) as exc:
        print(f"md_pme_speed: error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, OSError) else 1
    result["duration_s"] = round(time.time() - started, 1)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        p, coul = result["problem"], result["coulomb_at_step_0"]
        print(f"md (PME) vs LAMMPS (lj/cut/coul/long + pppm, diff ad): {p['atoms']} atoms, cutoff {p['cutoff']}, "
              f"grid {'x'.join(map(str, p['grid']))}, order {p['order']}, beta {p['alpha']:.5f}, {p['steps']} steps; "
              f"best of {args.repeat} alternating repetitions; {result['duration_s']:.0f} s")
        print(f"Coulomb energy per atom at step 0: md {coul['md']:.6f}, LAMMPS {coul['lammps']:.6f}")
        print("| ranks | LAMMPS Matom-steps/s | md Matom-steps/s | md / LAMMPS | LAMMPS pair s | md pair s | "
              "LAMMPS kspace s | md PME s | goal >= 0.7 |")
        print("|---|---|---|---|---|---|---|---|---|")
        for row in result["rows"]:
            print(f"| {row['ranks']} | {row['lammps'] / 1e6:.3f} | {row['md'] / 1e6:.3f} | {row['ratio']:.2f} | "
                  f"{row['lammps_pair_s']:.2f} | {row['md_pair_s']:.2f} | {row['lammps_long_s']:.2f} | "
                  f"{row['md_long_s']:.2f} | {'met' if row['met'] else 'MISSED'} |")
    return 0 if all(row["met"] for row in result["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
