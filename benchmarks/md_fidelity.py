#!/usr/bin/env python3
"""md's overhead on emulated topologies beside a production MD code's (LAMMPS) on the same ones.

    sudo .venv/bin/python benchmarks/md_fidelity.py              # 2 ranks, 3 repetitions, both presets
    sudo .venv/bin/python benchmarks/md_fidelity.py --repeat 5 --json
    sudo .venv/bin/python benchmarks/md_fidelity.py --custom cells=32,cutoff=3.2,density=0.7,temperature=1.0,steps=60
    sudo .venv/bin/python benchmarks/md_fidelity.py --lock /tmp/vnb-machine.lock   # on a shared machine
    sudo .venv/bin/python benchmarks/md_fidelity.py --pme --repeat 3  # charges, md's PME against LAMMPS's PPPM
    .venv/bin/python benchmarks/md_fidelity.py --table run1.json run2.json           # earlier runs, pooled

For each physics, runs md (`vnetbench run md`) and LAMMPS (`vnetbench exec -- lmp`, pair style lj/cut,
the same input numbers) on native, 2vm-1vswitch and 2vm-2vswitch (and the 4-VM presets with --four,
which needs 4 ranks), one code on every topology and then the other, which goes first and the order
of the topologies turning round every repetition, both under the MPI LAMMPS is linked against. The
presets: LAMMPS's in.lj (cutoff 2.5, 256,000 atoms) and a longer cutoff (5.0 at 108,000 atoms: about 7x
the pair work per byte exchanged); --custom adds any fcc Lennard-Jones liquid (cells per side, cutoff,
density, temperature, steps), so that a fidelity claim can be checked on physics nobody tuned on.

A topology's overhead, per repetition, is a code's step-loop time there over its native time in the same
repetition, minus 1 (md: ``elapsed_s``; LAMMPS: "Loop time"); the two ran seconds apart, so the machine's
drifting speed cancels. The median over repetitions decides; the best-of overheads are printed beside. Goal:
md's overhead within 2 percentage points of LAMMPS's on every topology and physics, and decided: a 90%
bootstrap interval of the gap over the repetitions that does not reach across the goal's edge. Where the
runs swing more than that (a shared VM), the row says undecided rather than passing or failing on noise.
A second table splits each gap: the seconds a topology added to each code's loop and to its communication (LAMMPS's
Comm section, md's ghost exchange and migration, each on the slowest rank), and the gap md would show had it paid
LAMMPS's seconds (a code whose native loop is shorter shows the same cost as a larger share); the rest is what md
pays differently.

With --pme the physics are charged (md_common.IN_PME): md with --electrostatics pme --pme-every 1 against LAMMPS's
lj/cut/coul/long with PPPM on md's grid, order and Ewald splitting, so both codes' long-range part pays its
all-to-all FFT transposes on every step; presets: md's stmv physics (cutoff 5.8) and a shorter cutoff (3.5, whose
finer grid makes the long-range part, and its transposes, a larger share), both at 55,296 atoms. md runs the distributed
FFT as the code it is compared with does (--pme-fft c2c: LAMMPS's complex FFTs, each 3D FFT transposed back to its
slabs, 4 transposes per evaluation at 2 ranks), unless told --pme-fft r2c (GROMACS's and NAMD's: real-to-complex, the
solve in the transposed layout, 2 transposes of half the values: a quarter of PPPM's mesh bytes).

Uses copies of the presets named mdfid-PRESET, so that other runs of the presets do not clash. A
repetition of one physics is a block: with --lock FILE each block holds an exclusive flock on FILE and
brings the topologies up and takes them down inside it, so other users of the machine get turns and
never meet our namespaces and bridges; without, they stand for the whole run.
Needs root. Exit 0 when every goal is met, 1 when one is missed or a run failed, 2 when it cannot run.
"""

import argparse
import contextlib
import fcntl
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from md_common import (DEFAULT_DENSITY, DEFAULT_TEMPERATURE, IN_PME, BenchError, loadavg, pme_problem,  # noqa: E402
                       retried, run_lammps, run_lammps_pme, run_md, run_md_pme, same_mpi, scratch, vnetbench,
                       write_input)

from perf.programs import others_busy_now, wait_for_quiet  # noqa: E402
from perf.targets import bootstrap_interval  # noqa: E402

from vnetbench.kernels import md  # noqa: E402

GOAL_PP = 2.0
PHYSICS = {"in.lj (cutoff 2.5)": {"cells": 40, "cutoff": 2.5, "steps": 100},
           "long cutoff (5.0)": {"cells": 30, "cutoff": 5.0, "steps": 40}}
PHYSICS_PME = {"PME: stmv physics (cutoff 5.8)": {"cells": 24, "cutoff": 5.8, "steps": 20},
               "PME: cutoff 3.5": {"cells": 24, "cutoff": 3.5, "steps": 40}}
CUSTOM_KEYS = {"cells": int, "cutoff": float, "density": float, "temperature": float, "steps": int}
CUSTOM_DEFAULTS = {"cells": 40, "cutoff": 2.5, "density": DEFAULT_DENSITY, "temperature": DEFAULT_TEMPERATURE,
                   "steps": 100}


def custom(text: str) -> tuple[str, dict]:
    """(name, physics) of a ``--custom`` spec, KEY=VALUE pairs separated by commas; ValueError if bad."""
    given = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or key not in CUSTOM_KEYS:
            raise ValueError(f"{item!r}: use KEY=VALUE with KEY one of {', '.join(CUSTOM_KEYS)}")
        try:
            given[key] = CUSTOM_KEYS[key](value)
        except ValueError:
            raise ValueError(f"{key}: {value!r} is not allowed; use a {CUSTOM_KEYS[key].__name__} > 0") from None
        if given[key] <= 0:
            raise ValueError(f"{key}: {value} is not allowed; use a number > 0")
    p = {**CUSTOM_DEFAULTS, **given}
    name = (f"{p['cells']} cells, rc {p['cutoff']:g}, rho {p['density']:g}, T {p['temperature']:g}, "
            f"{p['steps']} steps")
    return name, p


def parse(argv):
    parser = argparse.ArgumentParser(prog="md_fidelity.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of each run (default 3)")
    parser.add_argument("--ranks", type=int, default=2, help="ranks (default 2)")
    parser.add_argument("--four", action="store_true", help="also the 4-VM presets (needs --ranks 4 or more)")
    parser.add_argument("--physics", default=None,
                        help=f"presets, comma-separated, from: {'; '.join(PHYSICS)} (default: all of them, or "
                             f"none when --custom is given)")
    parser.add_argument("--custom", action="append", default=[], metavar="KEY=VALUE,...",
                        help="a physics of its own (repeatable): cells (fcc cells per side), cutoff, density, "
                             "temperature, steps; unnamed keys are in.lj's (40, 2.5, 0.8442, 1.44, 100)")
    parser.add_argument("--lock", metavar="FILE", help="hold an flock on FILE for each block (one repetition of "
                                                       "one physics), topologies up and down inside it: instead "
                                                       "of running the whole script under flock FILE")
    parser.add_argument("--quiet-wait", type=float, default=0.0, metavar="S",
                        help="before each run wait up to S seconds for other processes to use under half a core "
                             "(default 0: no wait); every sample records what others used just before it")
    parser.add_argument("--pme", action="store_true",
                        help=f"charged physics, md's PME against LAMMPS's PPPM; presets: {'; '.join(PHYSICS_PME)}")
    parser.add_argument("--pme-fft", choices=("c2c", "r2c"), default="c2c",
                        help="with --pme: md's distributed FFT (default c2c, LAMMPS's PPPM scheme, as the code md is "
                             "compared with; r2c: GROMACS's and NAMD's, md's own default)")
    parser.add_argument("--json", action="store_true", help="print one JSON document with every sample")
    parser.add_argument("--table", nargs="+", metavar="FILE",
                        help="run nothing: print the table of earlier --json documents, their samples pooled")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.ranks < 1:
        parser.error("--repeat and --ranks: use whole numbers >= 1")
    if args.quiet_wait < 0:
        parser.error(f"--quiet-wait: {args.quiet_wait:g} is not allowed; use a number of seconds >= 0")
    if args.four and args.ranks < 4:
        parser.error("--four: the 4-VM presets need --ranks 4 or more")
    if args.pme and args.custom:
        parser.error("--custom: not with --pme (its physics are the PME presets)")
    presets = PHYSICS_PME if args.pme else PHYSICS
    if args.physics is None:
        args.physics = "" if args.custom else ",".join(presets)
    names = [name.strip() for name in args.physics.split(",") if name.strip()]
    unknown = [name for name in names if name not in presets]
    if unknown:
        parser.error(f"--physics: {unknown[0]!r} is not allowed; choose from {'; '.join(presets)}")
    args.problems = {name: {"density": DEFAULT_DENSITY, "temperature": DEFAULT_TEMPERATURE, **presets[name]}
                     for name in names}
    for text in args.custom:
        try:
            name, problem = custom(text)
        except ValueError as exc:
            parser.error(f"--custom: {exc}")
        args.problems[name] = problem
    if not args.problems:
        parser.error("--physics: none chosen; name a preset or give --custom")
    return args


def private_files(presets, directory: Path) -> dict:
    """A YAML file per preset, the preset's shape under the name mdfid-PRESET."""
    import yaml

    from vnetbench.topologies.model import presets as known

    files = {}
    for name in presets:
        if name == "native":
            files[name] = "native"
            continue
        path = directory / f"mdfid-{name}.yaml"
        path.write_text(yaml.safe_dump({**known.PRESETS[name], "name": f"mdfid-{name}"}))
        files[name] = str(path)
    return files


def topology(action: str, spec: str) -> None:
    done = subprocess.run([vnetbench(), "topology", action, spec], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise BenchError(f"topology {action} {spec}: {done.stderr.strip()[-500:]}")


@contextlib.contextmanager
def held(path: str | None):
    """An exclusive flock on ``path`` (nothing when None) for the ``with`` block."""
    if path is None:
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def standing(specs, log):
    """The topologies ``specs`` up for the ``with`` block, and down after it (bring-up is not measured)."""
    up = []
    try:
        for spec in specs:
            topology("up", spec)
            up.append(spec)
        yield
    finally:
        for spec in up:
            try:
                topology("down", spec)
            except (BenchError, subprocess.SubprocessError) as exc:
                log(f"could not take {spec} down: {exc}")


def one_run(side: str, spec: str, p: dict, args, infile: Path, store: Path, mpi: str, log) -> dict:
    """One run of md or LAMMPS on ``spec`` with physics ``p``: its sample."""
    # other processes' load just before (during the run it cannot be told from ours: the ranks inside
    # the VMs are no waited-for children of ours)
    others = wait_for_quiet(args.quiet_wait) if args.quiet_wait else others_busy_now()
    sample = {"loadavg_before": loadavg(), "others_busy_before": others}
    common = (spec, args.ranks, p["cells"], p["cutoff"], p["steps"])
    physical = {"density": p["density"], "temperature": p["temperature"]}
    if args.pme:
        problem = pme_problem(p["cells"], p["cutoff"], p["steps"], args.pme_fft)
        if side == "md":
            out = retried(lambda: run_md_pme(spec, args.ranks, problem, store, mpi), log)
            sample["phases_s"] = {name: out["metrics"][name] for name, _ in md.PHASES if name in out["metrics"]}
        else:
            out = retried(lambda: run_lammps_pme(spec, args.ranks, problem, infile.with_name("in.pme"), mpi), log)
            sample["sections_s"] = out["sections_max_s"]
        sample["loop_s"] = out["loop_s"]
        return sample
    if side == "md":
        metrics = retried(lambda: run_md(*common, store, 1800, mpi, **physical), log)["metrics"]
        sample["loop_s"] = metrics["elapsed_s"]
        # where md's time went: the slowest rank's seconds per phase
        sample["phases_s"] = {name: metrics[name] for name, _ in md.PHASES if name in metrics}
    else:
        out = retried(lambda: run_lammps(*common, infile, 1800, mpi, **physical), log)
        sample["loop_s"] = out["loop_s"]
        sample["sections_s"] = out["sections_max_s"]  # LAMMPS's timing breakdown, the slowest rank's
    return sample


def measure(args, log) -> dict:
    names = ["native", "2vm-1vswitch", "2vm-2vswitch"] + (["4vm-1vswitch", "4vm-4vswitch"] if args.four else [])
    samples = {p: {t: {"md": [], "lammps": []} for t in names} for p in args.problems}
    mpi = same_mpi()
    log(f"both codes under --mpi {mpi} (LAMMPS's MPI)")
    with scratch("md-fidelity-") as tmp:
        directory = Path(tmp)
        infile, store = write_input(directory), directory / "results.jsonl"
        (directory / "in.pme").write_text(IN_PME)
        files = private_files(names, directory)
        specs = [files[name] for name in names[1:]]
        # without a lock the topologies stand for the whole run; with one, for a block at a time
        with standing([] if args.lock else specs, log):
            for rep in range(args.repeat):
                for physics, p in args.problems.items():
                    with held(args.lock), standing(specs if args.lock else [], log):
                        # an overhead is one code's ratio of its own runs, so each code's runs on every
                        # topology come one after the other (a drift in the machine's speed between them
                        # then moves less); which code goes first, and the order of the topologies, turn
                        # round every repetition
                        for side in ("md", "lammps") if rep % 2 == 0 else ("lammps", "md"):
                            for name in names if rep % 2 == 0 else names[::-1]:
                                sample = one_run(side, files[name], p, args, infile, store, mpi, log)
                                samples[physics][name][side].append(sample)
                                others = sample["others_busy_before"]
                                log(f"rep {rep + 1}, {physics}, {name}, {side}: {sample['loop_s']:.3f} s (load "
                                    f"{sample['loadavg_before']:.2f}, others "
                                    f"{'?' if others is None else format(others, '.2f')} cores)")
    return {"ranks": args.ranks, "repeat": args.repeat, "mpi": mpi, "physics": args.problems, "goal_pp": GOAL_PP,
            "pme": args.pme, "pme_fft": args.pme_fft if args.pme else None,
            "rows": overheads(samples, list(args.problems), names), "samples": samples}


def repetitions(samples, physics, name, side) -> list[tuple[dict, dict]]:
    """One code's (native run, run on ``name``) of each repetition."""
    return list(zip(samples[physics]["native"][side], samples[physics][name][side]))


def paired(samples, physics, name, side) -> list[float]:
    """Per repetition, one code's overhead on ``name``, in per cent: its run there over its native run of the same
    repetition. The two ran seconds apart (a code's runs on every topology come in a row), so a drift in the
    machine's speed between repetitions (a sixth within minutes on a shared VM) cancels, where a ratio of medians
    would pair runs minutes apart."""
    return [100 * (here["loop_s"] / base["loop_s"] - 1) for base, here in repetitions(samples, physics, name, side)]


def added(samples, physics, name, side) -> list[float]:
    """Per repetition, the seconds ``name`` added to one code's step loop over its native run of the same repetition."""
    return [here["loop_s"] - base["loop_s"] for base, here in repetitions(samples, physics, name, side)]


def comm_s(sample, side) -> float | None:
    """A run's seconds in communication on its slowest rank, the same work for both codes: LAMMPS's Comm section
    (forward and reverse exchanges, migration, borders); md's ghost exchange plus its migration and ghost lists.
    None where the run did not say (runs of an earlier version of this script)."""
    if side == "lammps":
        return sample.get("sections_s", {}).get("comm")
    phases = sample.get("phases_s", {})
    return phases["comm_s"] + phases["migrate_s"] if {"comm_s", "migrate_s"} <= set(phases) else None


def comm_added(samples, physics, name, side) -> float | None:
    """The median over repetitions of the seconds ``name`` added to one code's communication; None unless every
    repetition's two runs say."""
    pairs = [(comm_s(base, side), comm_s(here, side)) for base, here in repetitions(samples, physics, name, side)]
    if not pairs or any(a is None or b is None for a, b in pairs):
        return None
    return statistics.median(b - a for a, b in pairs)


def gap_interval(md_pct: list[float], lammps_pct: list[float], draws: int = 4000) -> tuple[float, float]:
    """The 90% bootstrap interval of (median of md's per-repetition overheads) - (LAMMPS's): repetitions drawn again
    with replacement, each code's on their own (their runs are separate). Seeded: one set of samples, one interval."""
    return bootstrap_interval(lambda rng: statistics.median(rng.choices(md_pct, k=len(md_pct)))
                              - statistics.median(rng.choices(lammps_pct, k=len(lammps_pct))), draws)


def overheads(samples, physics_names, names) -> list[dict]:
    rows = []
    for physics in physics_names:
        def best(name, side):
            return min(s["loop_s"] for s in samples[physics][name][side])

        for name in names[1:]:
            row = {"physics": physics, "topology": name}
            for side in ("md", "lammps"):
                # the median decides: a run slowed by load from elsewhere moves a median of three less than it
                # moves a mean, and a lucky fast one less than it moves a best-of (kept beside, tagged best_)
                each = paired(samples, physics, name, side)
                row[f"{side}_overheads_pct"] = each
                row[f"{side}_overhead_pct"] = statistics.median(each)
                row[f"{side}_native_s"] = statistics.median(s["loop_s"] for s in samples[physics]["native"][side])
                row[f"{side}_s"] = statistics.median(s["loop_s"] for s in samples[physics][name][side])
                row[f"best_{side}_native_s"], row[f"best_{side}_s"] = best("native", side), best(name, side)
                row[f"best_{side}_overhead_pct"] = 100 * (row[f"best_{side}_s"] / row[f"best_{side}_native_s"] - 1)
                row[f"{side}_added_s"] = statistics.median(added(samples, physics, name, side))
                row[f"{side}_comm_added_s"] = comm_added(samples, physics, name, side)
            for tag in ("", "best_"):
                row[f"{tag}gap_pp"] = row[f"{tag}md_overhead_pct"] - row[f"{tag}lammps_overhead_pct"]
            # the gap md would show if the topology added to its loop the seconds it added to LAMMPS's: what the
            # two codes' native speeds alone make of the same cost (a shorter loop, a larger share)
            row["speed_gap_pp"] = 100 * row["lammps_added_s"] * (1 / row["md_native_s"] - 1 / row["lammps_native_s"])
            low, high = gap_interval(row["md_overheads_pct"], row["lammps_overheads_pct"])
            row["gap_interval_pp"] = [low, high]
            seen = [s["others_busy_before"] for where in ("native", name) for side in ("md", "lammps")
                    for s in samples[physics][where][side] if s.get("others_busy_before") is not None]
            row["others_busy_max"] = max(seen) if seen else None
            row["met"] = abs(row["gap_pp"]) <= GOAL_PP
            # decided: the interval does not reach across the goal's edge (a verdict the noise could turn round
            # is no verdict); on a machine whose runs swing by several per cent, more repetitions decide
            row["decided"] = (-GOAL_PP <= low and high <= GOAL_PP) if row["met"] else (high < -GOAL_PP or low > GOAL_PP)
            rows.append(row)
    return rows


def pooled(paths: list[str]) -> dict:
    """The result of earlier --json runs, their samples pooled (a configuration's medians over all of them)."""
    docs = [json.loads(Path(path).read_text()) for path in paths]
    # md's FFT scheme (documents from before --pme-fft ran r2c): runs of two schemes are two experiments
    schemes = {doc.get("pme_fft", "r2c") if doc.get("pme") else None for doc in docs}
    if len(schemes) > 1:
        raise ValueError(f"they ran md with different --pme-fft ({', '.join(sorted(map(str, schemes)))}); pool one")
    samples, problems = {}, {}
    for doc in docs:
        problems.update(doc["physics"])
        for physics, where in doc["samples"].items():
            for name, sides in where.items():
                for side, runs in sides.items():
                    samples.setdefault(physics, {}).setdefault(name, {}).setdefault(side, []).extend(runs)
    names = list(next(iter(samples.values())))
    return {"ranks": docs[0]["ranks"], "repeat": sum(doc["repeat"] for doc in docs), "mpi": docs[0]["mpi"],
            "pme": any(doc.get("pme") for doc in docs), "pme_fft": schemes.pop(),
            "physics": problems, "goal_pp": GOAL_PP, "rows": overheads(samples, list(samples), names),
            "samples": samples, "duration_s": sum(doc.get("duration_s", 0) for doc in docs),
            "loadavg_end": docs[-1].get("loadavg_end"), "pooled": paths}


def verdict(row) -> str:
    if not row["decided"]:
        return "undecided (noise)"
    return "yes" if row["met"] else "NO"


def table(result) -> None:
    runs = f"{len(result['pooled'])} runs pooled, " if len(result.get("pooled", [])) > 1 else ""
    codes = (f"md (PME, --pme-fft {result.get('pme_fft') or 'r2c'}) and LAMMPS (lj/cut/coul/long, PPPM diff ad)"
             if result.get("pme") else "md and LAMMPS (lj/cut)")
    print(f"{codes} at {result['ranks']} ranks under {result['mpi']}, {runs}{result['repeat']} "
          f"repetitions; overhead = a topology's step-loop time over native's in the same repetition, minus 1, median "
          f"over the repetitions (best-of over best-of in brackets); gap interval: 90% bootstrap over the "
          f"repetitions; {result['duration_s']:.0f} s, load average at the end {result['loadavg_end']:.2f}")
    print("| physics | topology | LAMMPS native s | LAMMPS overhead | md native s | md overhead | gap | gap interval | "
          f"within {GOAL_PP:g} pp | others before a run, cores (max) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in result["rows"]:
        low, high = r["gap_interval_pp"]
        print(f"| {r['physics']} | {r['topology']} | {r['lammps_native_s']:.2f} | "
              f"{r['lammps_overhead_pct']:+.1f}% ({r['best_lammps_overhead_pct']:+.1f}%) | "
              f"{r['md_native_s']:.2f} | {r['md_overhead_pct']:+.1f}% ({r['best_md_overhead_pct']:+.1f}%) | "
              f"{r['gap_pp']:+.1f} pp ({r['best_gap_pp']:+.1f}) | {low:+.1f} to {high:+.1f} | {verdict(r)} | "
              f"{'-' if r['others_busy_max'] is None else format(r['others_busy_max'], '.2f')} |")
    print("\nWhere a gap comes from: the seconds a topology added to each code's loop, and to its communication on "
          "the slowest rank (LAMMPS's Comm section; md's ghost exchange and migration), medians over the repetitions; "
          "the gap md would show had it paid LAMMPS's seconds - what the codes' native speeds alone make of one cost; "
          "the rest is what md pays differently")
    print("| physics | topology | LAMMPS added s | md added s | LAMMPS comm added s | md comm added s | "
          "gap at LAMMPS's seconds | rest of the gap |")
    print("|---|---|---|---|---|---|---|---|")

    def seconds(value):
        return "-" if value is None else f"{value:+.3f}"

    for r in result["rows"]:
        print(f"| {r['physics']} | {r['topology']} | {r['lammps_added_s']:+.3f} | {r['md_added_s']:+.3f} | "
              f"{seconds(r.get('lammps_comm_added_s'))} | {seconds(r.get('md_comm_added_s'))} | "
              f"{r['speed_gap_pp']:+.1f} pp | {r['gap_pp'] - r['speed_gap_pp']:+.1f} pp |")
    undecided = sum(not r["decided"] for r in result["rows"])
    if undecided:
        print(f"\n{undecided} of {len(result['rows'])} rows undecided: the repetitions' spread on this machine is wider "
              f"than the {GOAL_PP:g}-point goal; more repetitions (--repeat), or a quieter machine, decide them")


def ok(result) -> bool:
    return all(r["met"] and r["decided"] for r in result["rows"])


def main(argv=None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.table:
        try:
            result = pooled(args.table)
        except (OSError, ValueError, KeyError, StopIteration) as exc:
            print(f"md_fidelity: --table: cannot read {', '.join(args.table)}: {exc}", file=sys.stderr)
            return 2
        table(result)
        return 0 if ok(result) else 1
    if os.geteuid() != 0:
        print("md_fidelity: needs root (it brings netns topologies up)", file=sys.stderr)
        return 2
    started = time.time()
    try:
        result = measure(args, lambda text: print(f"md_fidelity: {text}", file=sys.stderr, flush=True))
    except BenchError as exc:
        print(f"md_fidelity: error: {exc}", file=sys.stderr)
        return 1
    result["duration_s"] = round(time.time() - started, 1)
    result["loadavg_end"] = loadavg()
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        table(result)
    return 0 if ok(result) else 1


if __name__ == "__main__":
    sys.exit(main())
