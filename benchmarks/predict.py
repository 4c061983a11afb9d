#!/usr/bin/env python3
"""vnetbench predict's predicted overhead against the overhead measured on the topologies it predicts.

    sudo .venv/bin/python benchmarks/predict.py                    # md, halo, LAMMPS in.lj, long cutoff, PPPM; 6 reps
    sudo .venv/bin/python benchmarks/predict.py --repeat 3 --only halo,lammps-lj --json
    .venv/bin/python benchmarks/predict.py --table run1.json run2.json   # earlier runs' samples, pooled

For each program, at 2 ranks, under the MPI LAMMPS is linked against (``md_common.same_mpi``):

1. profile it natively (``vnetbench run ... --profile trace``, ``vnetbench exec --profile trace -- lmp ...``);
2. calibrate native, 2vm-1vswitch and 2vm-2vswitch (``vnetbench calibrate``, private copies of the presets named
   pred-PRESET, brought up once for the whole run);
3. predict the program's overhead on the two VM topologies (``vnetbench predict --json``): the replays'
   difference ``delta_s`` over the program's native loop time (median of the measured native runs below);
4. run it on native and on both topologies, ``--repeat`` times (default 6), alternating: every repetition runs
   every program on every topology, the order of the topologies turning round each repetition. A measured
   overhead is a program's loop time on the topology over its native loop time in the same repetition, minus 1;
   the median over repetitions is compared with the prediction. Goal: within 2 percentage points. Beside the goal's
   rows, 2vm-2vswitch against 2vm-1vswitch: both sides VMs, whose ranks a shared machine schedules alike; beside
   the medians, the best-of view (each side's fastest loop: other work can only slow a run down).

A row is decided only when the 90% bootstrap interval of the measured median (over the repetitions) lies wholly
within the goal's 2 points of the prediction (met) or wholly outside them (MISSED); otherwise it says undecided:
on a shared VM a run's overhead swings by several points, and a verdict that noise could turn round is none. Each
program runs about a second natively, so that one run's noise is a small share of it.

The loop time is the program's own (md and halo: ``elapsed_s``; LAMMPS: "Loop time"): the prediction's difference
covers the whole traced run (MPI_Init to MPI_Finalize), the loop being most of its communication.
Needs root (the topologies). Exit 0 when every goal is met, 1 when one is missed or a run failed, 2 when it cannot
run.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from md_common import (IN_LJ, IN_PME, LOOP, BenchError, lammps, loadavg, pme_problem, pme_vars,  # noqa: E402
                       retried, same_mpi, scratch, vnetbench)
from perf.programs import others_busy_now, wait_for_quiet  # noqa: E402
from perf.targets import median_interval  # noqa: E402

GOAL_PP = 2.0
TOPOLOGIES = ["native", "2vm-1vswitch", "2vm-2vswitch"]


# problems of about a second natively each (one run's noise a small share of its loop): 6 repetitions x 5 programs
# x 3 topologies on a 2-core machine. Three physics of LAMMPS: Lennard-Jones at the benchmark's cutoff, at a long
# one (four times the ghost atoms per atom), and charged atoms with PPPM (FFT remaps between the ranks each step)
PROGRAMS = {
    "md": {"kind": "run", "argv": ["md", "--cells", "16", "--cutoff", "2.5", "--steps", "200"]},
    "halo": {"kind": "run", "argv": ["halo", "--global", "64,64,64", "--steps", "4000"]},
    "lammps-lj": {"kind": "lammps", "input": "in.lj", "vars": {"c": 20, "rc": 2.5, "n": 100}},
    "lammps-long-cutoff": {"kind": "lammps", "input": "in.lj", "vars": {"c": 16, "rc": 5.0, "n": 40}},
    "lammps-pppm": {"kind": "lammps", "input": "in.pme", "vars": None, "pppm": (16, 3.5, 40)},
}
INPUTS = {"in.lj": IN_LJ, "in.pme": IN_PME}


def parse(argv):
    parser = argparse.ArgumentParser(prog="predict.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=6, help="alternated repetitions (default 6)")
    parser.add_argument("--only", help=f"programs, comma-separated (default all: {', '.join(PROGRAMS)})")
    parser.add_argument("--json", action="store_true", help="print one JSON document with every sample")
    parser.add_argument("--quiet-wait", type=float, default=0.0, metavar="S",
                        help="before each run wait up to S s for other processes to go (almost) idle (default 0)")
    parser.add_argument("--table", nargs="+", metavar="RUN.json", help="pool earlier runs' JSON and print the table")
    parser.add_argument("--keep", metavar="DIR", help="keep the run's store (profiles, calibrations, runs) in DIR")
    parser.add_argument("--repredict", metavar="DIR",
                        help="with --table: predict again from the profiles and calibrations a run kept (--keep DIR), "
                             "with this vnetbench's model")
    args = parser.parse_args(argv)
    args.programs = [p for p in (args.only.split(",") if args.only else PROGRAMS)]
    unknown = [p for p in args.programs if p not in PROGRAMS]
    if unknown:
        parser.error(f"--only: unknown program {unknown[0]}; choose from {', '.join(PROGRAMS)}")
    return args


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def vnb(*argv, timeout=1800, check=True) -> subprocess.CompletedProcess:
    done = subprocess.run([vnetbench(), *map(str, argv)], capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise BenchError(f"vnetbench {' '.join(map(str, argv[:4]))}... failed (exit {done.returncode}): "
                         f"{done.stderr.strip()[-600:]}")
    return done


def private_files(directory: Path) -> dict:
    """A YAML file per VM preset, its shape under the name pred-PRESET (other runs of the presets do not clash)."""
    import yaml

    from vnetbench.topologies.model import presets

    files = {"native": "native"}
    for name in TOPOLOGIES[1:]:
        path = directory / f"pred-{name}.yaml"
        path.write_text(yaml.safe_dump({**presets.PRESETS[name], "name": f"pred-{name}"}))
        files[name] = str(path)
    return files


def lammps_argv(p: dict, directory: Path) -> list[str]:
    out = [lammps(), "-in", str(directory / p["input"]), "-log", "none"]
    if p["vars"] is None:  # PPPM on the grid and splitting md derives for the problem
        return out + pme_vars(pme_problem(*p["pppm"], "c2c"))
    for key, value in p["vars"].items():
        out += ["-var", key, str(value)]
    return out


def last_record(store: Path) -> dict:
    return json.loads(store.read_text().splitlines()[-1])


QUIET = {"wait": 0.0}


def run_once(name: str, topology: str, store: Path, directory: Path, mpi: str, profile: bool = False) -> dict:
    """One run of program ``name`` on ``topology``: {"loop_s", "run_id", "others_busy"} (cores other processes kept
    busy just before)."""
    others = wait_for_quiet(QUIET["wait"]) if QUIET["wait"] else others_busy_now()
    out = _run_once(name, topology, store, directory, mpi, profile)
    out["others_busy"] = others
    return out


def _run_once(name: str, topology: str, store: Path, directory: Path, mpi: str, profile: bool) -> dict:
    p = PROGRAMS[name]
    extra = ["--profile", "trace"] if profile else []
    if p["kind"] == "run":
        done = vnb("run", *p["argv"], "--topology", topology, "--ranks", 2, "--mpi", mpi, "--store", store, "--json",
                   *extra)
        record = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")][-1]
        if record["status"] != "ok":
            raise BenchError(f"{name} on {topology}: {record['status']}: {record['validation'].get('detail')}")
        return {"loop_s": record["metrics"]["elapsed_s"], "run_id": record["run_id"]}
    argv = ["exec", "--topology", topology, "--ranks", 2, "--mpi", mpi, "--timeout", 1800]
    argv += ["--record", "--store", store, *extra] if profile else []
    done = subprocess.run([vnetbench(), *map(str, argv), "--", *lammps_argv(p, directory)], capture_output=True,
                          text=True, timeout=1900, cwd=directory)
    found = list(LOOP.finditer(done.stdout))
    if done.returncode != 0 or not found:
        raise BenchError(f"{name} on {topology} failed (exit {done.returncode}): {(done.stderr or done.stdout)[-600:]}")
    out = {"loop_s": float(found[-1][1])}
    if profile:
        out["run_id"] = last_record(store)["run_id"]
    return out


def measure(args) -> dict:
    mpi = same_mpi()
    log(f"every program under --mpi {mpi} (LAMMPS's MPI)")
    result = {"mpi": mpi, "repeat": args.repeat, "goal_pp": GOAL_PP, "programs": {}, "calibrations": {}}
    with scratch("predict-") as tmp:
        directory = Path(tmp)
        store = directory / "results.jsonl"
        for name, text in INPUTS.items():
            (directory / name).write_text(text)
        files = private_files(directory)
        up = []
        try:
            for name in TOPOLOGIES[1:]:
                vnb("topology", "up", files[name], timeout=180)
                up.append(files[name])
            for name in TOPOLOGIES:
                began = time.monotonic()
                vnb("calibrate", "--topology", files[name], "--mpi", mpi, "--store", store, "--repeat", 3)
                cal = [json.loads(line) for line in store.read_text().splitlines()][-1]
                result["calibrations"][name] = {"run_id": cal["run_id"], "seconds": time.monotonic() - began,
                                                "paths": {k: {"oneway_us@8B": v["sizes"][0]["oneway_us"],
                                                              "MB/s@1MiB": v["sizes"][-1]["bandwidth_mbps"]}
                                                          for k, v in cal["calibration"]["paths"].items()}}
                log(f"calibrated {name} in {time.monotonic() - began:.1f} s: {result['calibrations'][name]['paths']}")
            for name in args.programs:
                profiled = retried(lambda: run_once(name, "native", store, directory, mpi, profile=True), log)
                entry = {"profile": profiled["run_id"], "profiled_loop_s": profiled["loop_s"], "predicted": {},
                         "loops": {t: [] for t in TOPOLOGIES}}
                for target in TOPOLOGIES[1:]:
                    done = vnb("predict", "--profile", profiled["run_id"], "--topology", files[target], "--store",
                               store, "--json")
                    entry["predicted"][target] = json.loads(done.stdout)
                    p = entry["predicted"][target]
                    log(f"{name} on {target}: predicted delta {p['delta_s']:.4f} s ({p['overhead_pct']:+.2f}% of "
                        f"the traced {p['baseline_elapsed_s']:.3f} s); self-consistency "
                        f"{p['replay']['self_error_pct']:+.1f}%")
                result["programs"][name] = entry
            for rep in range(args.repeat):
                for name in args.programs:
                    order = TOPOLOGIES if rep % 2 == 0 else TOPOLOGIES[::-1]
                    for target in order:
                        run = retried(lambda: run_once(name, files[target], store, directory, mpi), log)
                        result["programs"][name]["loops"][target].append(run["loop_s"])
                        result["programs"][name].setdefault("others_busy", {}).setdefault(target, []).append(
                            run["others_busy"])
                        log(f"rep {rep + 1} {name} on {target}: {run['loop_s']:.3f} s (load {loadavg():.2f}, others "
                            f"{run['others_busy'] if run['others_busy'] is None else round(run['others_busy'], 2)} "
                            f"cores)")
        finally:
            for spec in up:
                vnb("topology", "down", spec, timeout=180, check=False)
            if args.keep:
                import shutil

                shutil.copytree(directory, args.keep, dirs_exist_ok=True)  # copy2: the spec files keep their times
    return result


def repredict(result: dict, directory: str) -> None:
    """Each program's predictions again, from the profiles and calibrations kept in ``directory``."""
    store = Path(directory) / "results.jsonl"
    for name, entry in result["programs"].items():
        for target in TOPOLOGIES[1:]:
            done = vnb("predict", "--profile", entry["profile"], "--topology", Path(directory) / f"pred-{target}.yaml",
                       "--store", store, "--json", "--no-record")
            entry["predicted"][target] = json.loads(done.stdout)


def rows(result: dict) -> list[dict]:
    out = []
    for name, entry in result["programs"].items():
        loops = entry["loops"]
        reps = min(len(v) for v in loops.values())
        if not reps:
            continue
        native = statistics.median(loops["native"][:reps])
        for target in TOPOLOGIES[1:]:
            paired = [100.0 * (loops[target][i] / loops["native"][i] - 1.0) for i in range(reps)]
            measured = statistics.median(paired)
            p = entry["predicted"][target]
            predicted = 100.0 * p["delta_s"] / native
            out.append({"program": name, "topology": target, "baseline": "native", "predicted_pct": predicted,
                        "measured_pct": measured, "error_pp": predicted - measured, "native_loop_s": native,
                        "reps": reps, "spread_pp": [min(paired), max(paired)],
                        "self_error_pct": p["replay"]["self_error_pct"], "goal": True,
                        **decide(predicted, paired), **best(loops, target, "native", p["delta_s"])})
        # beside the goal's rows: the uplinks against one switch, both sides VMs (the same scheduling of the ranks
        # on a shared machine, where native's ranks and the VMs' are not scheduled alike)
        one, two = (entry["predicted"][t] for t in TOPOLOGIES[1:])
        base = statistics.median(loops[TOPOLOGIES[1]][:reps])
        paired = [100.0 * (loops[TOPOLOGIES[2]][i] / loops[TOPOLOGIES[1]][i] - 1.0) for i in range(reps)]
        predicted, measured = 100.0 * (two["delta_s"] - one["delta_s"]) / base, statistics.median(paired)
        out.append({"program": name, "topology": TOPOLOGIES[2], "baseline": TOPOLOGIES[1], "predicted_pct": predicted,
                    "measured_pct": measured, "error_pp": predicted - measured, "native_loop_s": native, "reps": reps,
                    "spread_pp": [min(paired), max(paired)], "self_error_pct": two["replay"]["self_error_pct"],
                    "goal": False, **decide(predicted, paired),
                    **best(loops, TOPOLOGIES[2], TOPOLOGIES[1], two["delta_s"] - one["delta_s"])})
    return out


def decide(predicted: float, paired: list[float]) -> dict:
    """The measured median's 90% bootstrap interval and the verdict it allows: met when the whole interval lies
    within the goal of the prediction, missed when it lies wholly outside, undecided otherwise (the noise could turn
    the verdict round)."""
    low, high = median_interval(paired) if len(paired) > 1 else (paired[0], paired[0])
    met = abs(predicted - statistics.median(paired)) <= GOAL_PP
    if met:
        decided = predicted - GOAL_PP <= low and high <= predicted + GOAL_PP
    else:
        decided = high < predicted - GOAL_PP or low > predicted + GOAL_PP
    return {"measured_interval_pp": [low, high], "met": met, "decided": decided,
            "verdict": ("met" if met else "MISSED") if decided else "undecided (noise)"}


def best(loops: dict, target: str, baseline: str, delta: float) -> dict:
    """The best-of view (other work can only slow a run down): each side's fastest loop, the predicted difference
    over the baseline's fastest."""
    fast_t, fast_b = min(loops[target]), min(loops[baseline])
    return {"best_predicted_pct": 100.0 * delta / fast_b, "best_measured_pct": 100.0 * (fast_t / fast_b - 1.0)}


def table(result: dict) -> None:
    print(f"predicted vs measured overhead at 2 ranks, {result['repeat']} alternated repetitions, medians "
          f"(goal: within {GOAL_PP:g} pp); MPI {result['mpi']}")
    print(f"{'program':<20}{'topology':<15}{'against':<15}{'predicted %':>12}{'measured %':>12}{'error pp':>10}"
          f"{'90% interval':>16}{'measured range':>18}{'best: pred/meas %':>19}{'native loop s':>15}"
          f"{'self-cons. %':>14}  verdict")
    for row in rows(result):
        low, high = row["spread_pp"]
        ilow, ihigh = row["measured_interval_pp"]
        verdict = row["verdict"] if row["goal"] else f"({row['verdict']}, beside the goal)"
        shown = f"{row['best_predicted_pct']:.1f}/{row['best_measured_pct']:.1f}"
        print(f"{row['program']:<20}{row['topology']:<15}{row['baseline']:<15}{row['predicted_pct']:>12.2f}"
              f"{row['measured_pct']:>12.2f}{row['error_pp']:>+10.2f}{f'{ilow:.1f}..{ihigh:.1f}':>16}"
              f"{f'{low:.1f}..{high:.1f}':>18}{shown:>19}"
              f"{row['native_loop_s']:>15.3f}{row['self_error_pct']:>+14.1f}  {verdict}")
    for name, cal in result.get("calibrations", {}).items():
        print(f"calibration of {name}: {cal['seconds']:.1f} s; {cal['paths']}")


def pooled(paths: list[str]) -> dict:
    runs = [json.loads(Path(p).read_text()) for p in paths]
    result = runs[0]
    for other in runs[1:]:
        for name, entry in other["programs"].items():
            mine = result["programs"].setdefault(name, entry)
            if mine is not entry:
                for t, loops in entry["loops"].items():
                    mine["loops"][t] += loops
        result["repeat"] += other["repeat"]
    return result


def main(argv=None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    QUIET["wait"] = args.quiet_wait
    if args.table:
        result = pooled(args.table)
        if args.repredict:
            repredict(result, args.repredict)
    else:
        try:
            result = measure(args)
        except BenchError as exc:
            print(f"predict.py: {exc}", file=sys.stderr)
            return 1
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        table(result)
    return 0 if all(row["met"] and row["decided"] for row in rows(result) if row["goal"]) else 1


if __name__ == "__main__":
    sys.exit(main())
