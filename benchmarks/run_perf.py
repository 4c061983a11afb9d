#!/usr/bin/env python3
"""vnetbench against C references of the same loops, and its own cost against bare launchers, measured
alternately in one run; prints ratios and differences.

    python benchmarks/run_perf.py            # full: the kernels' default counts, 9 repetitions
    python benchmarks/run_perf.py --quick    # fewer repetitions and iterations
    python benchmarks/run_perf.py --json     # machine output (every sample kept)

Exit codes: 0 every target met, 1 a target missed or a run failed, 2 the harness could not run.
Run it with the virtual environment's Python: the references are compiled with its mpicc and
vnetbench is started from it. See benchmarks/README.md.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perf import FORMAT_VERSION, HarnessError, build, launch, measure, table, targets  # noqa: E402

# overhead: `vnetbench run` against the bare launcher, one pair per MPI present (perf/launch.py);
# startup: `vnetbench --help` and `vnetbench report` on a 10-record store
PAIRS = ("stream", "pingpong", "halo", "overhead", "startup")


def parse(argv):
    parser = argparse.ArgumentParser(prog="run_perf.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and iterations")
    parser.add_argument("--repeat", type=int, metavar="R",
                        help="repetitions of each kernel pair (default 9; 3 with --quick)")
    parser.add_argument("--only", metavar="NAMES", default=",".join(PAIRS),
                        help=f"comma-separated subset of {','.join(PAIRS)}")
    parser.add_argument("--ranks", type=int, help="ranks per run (default: the usable cores, at least 2)")
    parser.add_argument("--stream-array-size", type=int, metavar="N",
                        help="STREAM's elements per array per rank (default: the kernel's, 4x the last-level "
                             "cache); libc's memcpy, which Copy calls, changes strategy with the size")
    parser.add_argument("--quiet-wait", type=float, default=0.0, metavar="S",
                        help="before each run, wait up to S seconds for other processes to leave the cores "
                             "(almost) idle (default 0: do not wait)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    parser.add_argument("--markdown", action="store_true", help="print the table as markdown")
    parser.add_argument("--save", metavar="FILE", help="also write the JSON document to FILE")
    args = parser.parse_args(argv)
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in PAIRS]
    if unknown or not chosen:
        parser.error(f"--only: {','.join(unknown) or 'nothing'} is not allowed; choose from {','.join(PAIRS)}")
    for option, value, lowest in (("--repeat", args.repeat, 1), ("--ranks", args.ranks, 2),
                                  ("--stream-array-size", args.stream_array_size, 1)):
        if value is not None and value < lowest:
            parser.error(f"{option}: {value} is not allowed; use a whole number >= {lowest}")
    if args.quiet_wait < 0:
        parser.error("--quiet-wait: must be >= 0")
    args.only = chosen
    return args


def cpu_facts(path: str = "/proc/cpuinfo") -> dict:
    """The first CPU's model name and identity (a VM's model name alone, "AMD EPYC", says little)."""
    wanted = {"model name": "cpu", "vendor_id": "vendor", "cpu family": "family", "model": "model",
              "stepping": "stepping", "CPU implementer": "implementer", "CPU part": "part"}
    facts = {}
    try:
        with open(path) as handle:
            for line in handle:
                if not line.strip():
                    break  # one processor's block is enough
                key, _, value = line.partition(":")
                if key.strip() in wanted:
                    facts.setdefault(wanted[key.strip()], value.strip())
    except OSError:
        pass
    facts.setdefault("cpu", platform.processor() or platform.machine() or "unknown")
    try:  # the CPU numba compiles the kernels for (gcc's -march=native is the references')
        import llvmlite.binding as llvm
        facts["llvm_cpu"] = llvm.get_host_cpu_name()
    except ImportError:
        pass
    return facts


def environment(settings) -> dict:
    from vnetbench import mpi

    return {"hostname": platform.node(), **cpu_facts(), "usable_cpus": mpi.usable_cpus(),
            "open_mpi": mpi.version(), "compiler": build.compiler_version(), "flags": build.FLAGS,
            "libc": " ".join(platform.libc_ver()), "python": platform.python_version(),
            "ranks": settings.ranks, "loadavg_start": os.getloadavg()[0]}


def machine(info) -> str:
    ident = ", ".join(f"{key} {info[key]}" for key in ("vendor", "family", "model", "stepping", "implementer",
                                                       "part", "llvm_cpu") if key in info)
    return f"{info['cpu']} ({ident})" if ident else info["cpu"]


def make_pairs(names, settings, binaries, folder: Path):
    from vnetbench import mpi

    # the same mpirun arguments as `vnetbench run --mpi <the wheel's mpirun>` on this host, for C and Python alike
    wheel = launch.resolve("wheel Open MPI", str(mpi.mpirun()), settings.ranks)
    argv = wheel.launcher.command(wheel.spec.intent, [])

    def overhead():
        found = launch.present()
        if not found:
            raise HarnessError(f"no MPI launcher found (looked for {', '.join(launch.FLAVOURS.values())})")
        return [launch.kernel_pair(launch.resolve(name, path, settings.ranks), settings.ranks,
                                   folder / f"overhead-{i}.jsonl", settings.overhead_repeat)
                for i, (name, path) in enumerate(found.items())]

    makers = {
        "stream": lambda: [targets.stream_pair(settings, argv, binaries["stream_ref"])],
        "pingpong": lambda: [targets.pingpong_pair(settings, argv, binaries["pingpong_ref"])],
        "halo": lambda: [targets.halo_pair(settings, argv, binaries["halo_ref"])],
        "overhead": overhead,
        "startup": lambda: launch.startup_pairs(folder, settings.overhead_repeat),
    }
    return [pair for name in names for pair in makers[name]()], argv


def summary(verdicts) -> str:
    """The last line: met, missed, or not missed but undecided (the machine's noise)."""
    if all(v.met for v in verdicts):
        return "all targets met"
    if any(v.decided and not v.passed for v in verdicts):
        return "some targets missed"
    undecided = sum(not v.decided for v in verdicts)
    return f"no target missed, {undecided} undecided: the pairs spread wider than the margin (see above)"


def document(command, info, settings, argv, pairs, results, verdicts) -> dict:
    def per_side(name, attribute):
        return {side: getattr(results[name][side], attribute) for side in measure.SIDES}

    return {
        "format_version": FORMAT_VERSION,
        "command": command,
        "passed": all(v.met for v in verdicts),
        "environment": info,
        "settings": vars(settings),
        "launch": argv,
        "pairs": {p.name: {"reference": p.reference, "subject": p.subject, "repeat": p.repeat, "notes": p.notes,
                           "walls_s": per_side(p.name, "walls"), "others_busy_cores": per_side(p.name, "others_busy"),
                           "samples": per_side(p.name, "values"), "problems": per_side(p.name, "problems")}
                  for p in pairs},
        "targets": [v.to_dict() for v in verdicts],
    }


def header(command, info, settings, argv) -> str:
    busy = info["others_busy_cores_median"]
    return "\n".join([
        f"{command}  |  {machine(info)}, {info['usable_cpus']} cpus, {info['libc']}, Open MPI {info['open_mpi']}, "
        f"{info['compiler']} {' '.join(build.FLAGS)}",
        f"{settings.ranks} ranks, mpirun {' '.join(argv[1:])}; STREAM {settings.stream_array_size} elements "
        f"per array, {settings.stream_ntimes} times; {settings.repeat} repetitions per kernel "
        f"(stream {settings.stream_repeat}, overhead {settings.overhead_repeat}), C and vnetbench alternating; "
        f"best repetition of each (stream: median of the per-repetition ratios, per rank; overhead: median of "
        f"paired differences); pairs = lowest and highest per-repetition ratio or difference; "
        f"other load = cores other processes kept busy during "
        f"the deciding runs (C / vnetbench; median over all runs {'?' if busy is None else f'{busy:.1f}'}); "
        f"{info['duration_s']:.0f} s",
    ])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    from vnetbench import mpi

    ranks = args.ranks or max(2, mpi.usable_cpus())
    settings = targets.Settings.make(args.quick, ranks, args.repeat, args.stream_array_size)
    started = time.time()
    try:
        binaries = build.compile_all()
    except HarnessError as exc:
        print(f"run_perf: error: {exc}", file=sys.stderr)
        return 2
    info = environment(settings)
    launch.compile_bytecode()
    with tempfile.TemporaryDirectory(prefix="vnetbench-perf-") as tmp:
        try:
            pairs, launch_argv = make_pairs(args.only, settings, binaries, Path(tmp))
            results = measure.measure(pairs, lambda text: print(f"run_perf: {text}", file=sys.stderr, flush=True),
                                      args.quiet_wait)
        except HarnessError as exc:
            print(f"run_perf: error: {exc}", file=sys.stderr)
            return 2
    verdicts = measure.verdicts(pairs, results)
    busy = [b for per_pair in results.values() for side in per_pair.values() for b in side.others_busy
            if b is not None]
    info.update(loadavg_end=os.getloadavg()[0], duration_s=round(time.time() - started, 1),
                others_busy_cores_median=round(statistics.median(busy), 2) if busy else None)
    command = " ".join(["python benchmarks/run_perf.py", *argv])
    doc = document(command, info, settings, launch_argv, pairs, results, verdicts)
    if args.save:
        Path(args.save).write_text(json.dumps(doc, indent=2) + "\n")
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(header(command, info, settings, launch_argv))
        print(table.render(verdicts, markdown=args.markdown))
        for line in table.notes(verdicts):
            print(line)
        print(summary(verdicts))
    return 0 if doc["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
