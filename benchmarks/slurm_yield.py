"""Is yielding safe for Open MPI ranks under srun? Runs of a small allreduce, yielding and not, on the test cluster.

The Slurm tier's nodes share this machine's cores, so its ranks yield when idle (tests/harness/slurm_cluster.py).
Once, yielding, Open MPI 5's ranks under ``srun --mpi=pmix`` segfaulted in MPI_Init in about one run in twenty on
a loaded machine: Slurm's tree fence was no barrier on two nodes, and vnetbench now starts srun with
``SLURM_PMIX_FENCE=ring``. This script is the check behind that choice. It brings up the tier's cluster (munge,
slurmctld, four slurmd in network namespaces), starts ``--load`` busy loops, and inside one allocation of two nodes
runs ``vnetbench run allreduce --ranks 3`` (srun, one size, a few rounds) ``--runs`` times each with
``OMPI_MCA_mpi_yield_when_idle=1`` and without, alternated; it prints each way's runs, how many ended ok, the
statuses of the others and why (the record's detail), and the seconds a run took (median, range).

    python benchmarks/slurm_yield.py [--runs 50] [--load 2]     # as root, with slurm-wlm and munge installed

Exit codes: 0 every run ok, 1 a run was not ok, 2 the check could not run (not root, no Slurm, bad options).
Leaves nothing behind: interrupted (Ctrl-C) or terminated, the runs in the allocation stop after the one under way,
then the cluster, its allocation, the busy loops and the run folder go.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WAYS = {"yielding": {"OMPI_MCA_mpi_yield_when_idle": "1"}, "busy-polling": {}}
SMOKE = ["--max-size", "8", "--iterations", "5", "--warmup", "1"]
STOP = "stop"  # made in the run folder when the check is interrupted: the runs in the allocation stop


def inside(folder: Path, runs: int, partition: str) -> None:
    """In the allocation: the runs, alternated, each one's (way, exit, status, seconds, why) a JSON line."""
    from vnetbench.core.store import Store

    # each way sets the one thing it is about: the cluster's own setting (tests/harness/slurm_cluster.py) is dropped
    base = {k: v for k, v in os.environ.items() if k != "OMPI_MCA_mpi_yield_when_idle"}
    with open(folder / "runs.jsonl", "w") as out:
        for number in range(runs):
            for way, setting in WAYS.items():
                if (folder / STOP).exists():  # the check was interrupted: the run under way has ended whole
                    return
                store = folder / f"run-{number}-{way}.jsonl"
                started = time.monotonic()
                done = subprocess.run([sys.executable, "-m", "vnetbench", "run", "allreduce", "--ranks", "3",
                                       "--topology", f"slurm:{partition}", "--store", str(store), *SMOKE],
                                      env={**base, **setting}, capture_output=True, text=True, timeout=300,
                                      stdin=subprocess.DEVNULL)
                took = time.monotonic() - started
                records = Store(store).read() if store.exists() else []
                record = records[-1] if records else {}
                status = record.get("status", "no record")
                # why it was not ok: the record's own account (a rank's signal, a timeout), else stderr's last line
                said = [line for line in done.stderr.splitlines() if line.strip()]
                error = (record.get("validation") or {}).get("detail") or (said[-1] if said else "")
                out.write(json.dumps({"way": way, "exit": done.returncode, "status": status, "seconds": took,
                                      "error": error[:200]}) + "\n")
                out.flush()


def allocated(argv: list[str], env: dict, folder: Path, timeout: float) -> subprocess.CompletedProcess:
    """salloc running the runs, to its end; interrupted (or past ``timeout``), the runs are told to stop and salloc
    is given a minute to end with them before it is killed."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        (folder / STOP).touch()
        try:
            proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def spin() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)


def report(rows: list[dict]) -> int:
    bad = 0
    print(f"{'way':<14} {'runs':>4} {'ok':>4}  seconds a run: median (min - max)")
    for way in WAYS:
        mine = [row for row in rows if row["way"] == way]
        if not mine:
            continue
        ok = [row for row in mine if row["exit"] == 0 and row["status"] == "ok"]
        seconds = [row["seconds"] for row in mine]
        print(f"{way:<14} {len(mine):>4} {len(ok):>4}  {statistics.median(seconds):.2f} "
              f"({min(seconds):.2f} - {max(seconds):.2f})")
        for row in mine:
            if row not in ok:
                bad += 1
                print(f"  not ok: exit {row['exit']}, status {row['status']}: {row['error']}")
    return 1 if bad else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=50, help="runs each way (default 50)")
    parser.add_argument("--load", type=int, default=2, help="busy loops beside the runs (default 2)")
    parser.add_argument("--inside", help=argparse.SUPPRESS)
    parser.add_argument("--partition", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inside:
        # a Ctrl-C reaches the whole foreground group: the run under way ends by its own handler and this loop
        # stops at the STOP file the outer process makes, never killing a run halfway through its clean-up
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        inside(Path(args.inside), args.runs, args.partition)
        return 0
    # interrupted or terminated, even where started in the background (SIGINT ignored), the cluster still goes
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    if not 1 <= args.runs <= 1000:
        parser.error(f"--runs: {args.runs}; allowed: 1 to 1000")
    if not 0 <= args.load <= 64:
        parser.error(f"--load: {args.load}; allowed: 0 to 64")
    sys.path.insert(0, str(ROOT / "tests"))
    from harness.slurm_cluster import SlurmCluster, missing_requirements

    why = missing_requirements()
    if why:
        print(f"slurm_yield: cannot run: {why}", file=sys.stderr)
        return 2
    folder = Path(tempfile.mkdtemp(prefix="vnb-slurm-yield-"))
    loads = []
    try:
        with SlurmCluster(switches=2, per_switch=2) as cluster:
            loads = [spin() for _ in range(args.load)]
            done = allocated(["salloc", "--nodes=2", "--ntasks=3", "--switches=1",
                              f"--partition={cluster.partition}", sys.executable, __file__,
                              "--inside", str(folder), "--runs", str(args.runs), "--partition", cluster.partition],
                             cluster.env(), folder, timeout=600 + 60 * args.runs)
            version = cluster.version
        runs = folder / "runs.jsonl"
        rows = [json.loads(line) for line in runs.read_text().splitlines()] if runs.exists() else []
        if not rows:
            print(f"slurm_yield: no run finished (salloc exited {done.returncode}): {done.stderr[-1000:]}",
                  file=sys.stderr)
            return 1
        print(f"{version}; 3 ranks of allreduce {' '.join(SMOKE)} under srun, 2 nodes, beside {args.load} busy "
              f"loop(s) on {os.cpu_count()} cpus")
        code = report(rows)
        if done.returncode != 0:
            print(f"slurm_yield: salloc exited {done.returncode}: {done.stderr[-500:]}", file=sys.stderr)
            code = 1
        return code
    finally:
        for proc in loads:
            proc.kill()
            proc.wait()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("slurm_yield: interrupted; the cluster and the runs' folder are gone", file=sys.stderr)
        sys.exit(130)
