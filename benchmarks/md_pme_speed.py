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

import argparse
import json
import math
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from md_common import (LOOP, BenchError, breakdown, lammps, loadavg, retried, same_mpi, scratch,  # noqa: E402
                       vnetbench)

GOAL = 0.7

IN_PME = """\
variable c index 32
variable rc index 5.8
variable n index 20
variable rho index 0.8442
variable t index 1.44
units lj
atom_style charge
lattice fcc ${rho}
region box block 0 $c 0 $c 0 $c
create_box 2 box
create_atoms 1 box basis 1 1 basis 2 2 basis 3 2 basis 4 1
mass * 1.0
set type 1 charge 1.0
set type 2 charge -1.0
velocity all create ${t} 87287 loop geom
pair_style lj/cut/coul/long ${rc}
pair_coeff * * 1.0 1.0
kspace_style pppm 1e-5
kspace_modify mesh ${gx} ${gy} ${gz} order ${order} gewald ${g} diff ad
neighbor 0.3 bin
neigh_modify delay 0 every 20 check no
fix 1 all nve
thermo_style custom step temp pe ecoul elong etotal
thermo 50
run $n
"""

THERMO = re.compile(r"^\s*Step\s+Temp\s+PotEng\s+E_coul\s+E_long\s+TotEng\s*\n\s*0\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", re.M)


def parse(argv):
    parser = argparse.ArgumentParser(prog="md_pme_speed.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=32, help="fcc cells per side (default 32: 131,072 atoms)")
    parser.add_argument("--cutoff", type=float, default=5.8, help="cutoff, sigma (default 5.8, md's stmv)")
    parser.add_argument("--steps", type=int, default=20, help="time steps (default 20)")
    parser.add_argument("--ranks", default="1,2", help="rank counts, comma-separated (default 1,2)")
    parser.add_argument("--repeat", type=int, default=2, help="repetitions of each pair (default 2)")
    parser.add_argument("--json", action="store_true", help="print one JSON document with every sample")
    args = parser.parse_args(argv)
    try:
        args.ranks = [int(n) for n in args.ranks.split(",")]
    except ValueError:
        parser.error(f"--ranks: {args.ranks!r} is not allowed; use whole numbers separated by commas")
    for option, value in (("--cells", args.cells), ("--steps", args.steps), ("--repeat", args.repeat),
                          ("--ranks", min(args.ranks))):
        if value < 1:
            parser.error(f"{option}: {value} is not allowed; use a whole number >= 1")
    if args.cutoff <= 0:
        parser.error(f"--cutoff: {args.cutoff} is not allowed; use a number above 0")
    return args


def problem(args) -> dict:
    """The grid and splitting md derives for the problem (its own functions), to hand to LAMMPS."""
    from vnetbench.kernels import _md_physics as physics

    params = {"cells": (args.cells,) * 3, "cutoff": args.cutoff, "system": "lj"}
    length = args.cells * physics.lattice_constant(0.8442)
    return {"cells": args.cells, "atoms": 4 * args.cells ** 3, "cutoff": args.cutoff, "steps": args.steps,
            "grid": list(physics.pme_grid([length] * 3, physics.pme_spacing(params))), "order": 4,
            "alpha": physics.ewald_alpha(args.cutoff, 1e-5)}


def run_md(p, ranks, store, mpi, timeout=1800) -> dict:
    argv = [vnetbench(), "run", "md", "--topology", "native", "--ranks", str(ranks), "--cells", str(p["cells"]),
            "--cutoff", str(p["cutoff"]), "--steps", str(p["steps"]), "--electrostatics", "pme", "--pme-every", "1",
            "--mpi", mpi, "--json", "--store", str(store)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or len(records) != 1 or records[0]["status"] != "ok":
        raise BenchError(f"md at {ranks} ranks failed (exit {done.returncode}): "
                         f"{(records[0]['validation']['detail'] if records else done.stderr[-800:])}")
    m = records[0]["metrics"]
    if m["pme_grid"] != p["grid"] or not math.isclose(m["ewald_alpha"], p["alpha"], rel_tol=1e-12):
        raise BenchError(f"md used grid {m['pme_grid']} and beta {m['ewald_alpha']}, not {p['grid']}, {p['alpha']}")
    pme = sum(m[k] for k in ("pme_spread_s", "pme_fft_s", "pme_solve_s", "pme_gather_s"))
    return {"rate": m["atom_steps_per_s"], "coul0": m["thermo"][0]["coul"], "long_s": pme, "pair_s": m["force_s"]}


def run_lammps(p, ranks, infile, mpi, timeout=1800) -> dict:
    gx, gy, gz = p["grid"]
    argv = [vnetbench(), "exec", "--topology", "native", "--ranks", str(ranks), "--timeout", str(timeout),
            "--mpi", mpi, "--", lammps(), "-in", str(infile), "-var", "c", str(p["cells"]), "-var", "rc",
            str(p["cutoff"]), "-var", "n", str(p["steps"]), "-var", "gx", str(gx), "-var", "gy", str(gy),
            "-var", "gz", str(gz), "-var", "order", str(p["order"]), "-var", "g", repr(p["alpha"]), "-log", "none"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 30, cwd=infile.parent)
    found, thermo = LOOP.search(done.stdout), THERMO.search(done.stdout)
    if done.returncode != 0 or not found or not thermo:
        raise BenchError(f"LAMMPS at {ranks} ranks failed (exit {done.returncode}): "
                         f"{(done.stderr or done.stdout)[-800:]}")
    loop, procs, nsteps, atoms = float(found[1]), int(found[2]), int(found[3]), int(found[4])
    if procs != ranks or nsteps != p["steps"] or atoms != p["atoms"]:
        raise BenchError(f"LAMMPS ran {procs} procs, {nsteps} steps, {atoms} atoms; asked {ranks}, {p['steps']}, "
                         f"{p['atoms']}")
    sections = breakdown(done.stdout[found.end():])
    return {"rate": atoms * nsteps / loop, "coul0": float(thermo[3]) + float(thermo[4]),
            "long_s": sections.get("kspace"), "pair_s": sections.get("pair")}


def measure(args, log) -> dict:
    p = problem(args)
    samples = {n: {"md": [], "lammps": []} for n in args.ranks}
    mpi = same_mpi()
    with scratch("md-pme-speed-") as tmp:
        infile, store = Path(tmp) / "in.pme", Path(tmp) / "results.jsonl"
        infile.write_text(IN_PME)
        for rep in range(args.repeat):
            for ranks in args.ranks:
                order = ("md", "lammps") if rep % 2 == 0 else ("lammps", "md")
                for side in order:
                    load = loadavg()
                    if side == "md":
                        out = retried(lambda: run_md(p, ranks, store, mpi), log)
                    else:
                        out = retried(lambda: run_lammps(p, ranks, infile, mpi), log)
                    samples[ranks][side].append({**out, "loadavg_before": load})
                    log(f"rep {rep + 1}, {ranks} rank(s), {side}: {out['rate'] / 1e6:.3f} M atom-steps/s, long-range "
                        f"{out['long_s']:.2f} s, pairs {out['pair_s']:.2f} s (load {load:.2f})")
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
