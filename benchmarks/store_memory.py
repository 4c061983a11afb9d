"""Peak memory of ``vnetbench report`` and ``compare`` on a store of N records (default 100,000).

The store is built from one real record (a halo run on this machine, through the CLI) copied
with new run ids, repetitions and rank counts, so each line has a real record's size and shape.
Prints the store's size, each command's peak RSS (the kernel's ru_maxrss of that child, from wait4) and the
reference measured in the same run: the RSS of a Python that only imports vnetbench's analysis.

    python benchmarks/store_memory.py [--records 100000] [--keep DIR]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


# the CLI without its name in the argv: on a shared machine other test tiers end stray processes
# called vnetbench, and a 100,000-record report runs for minutes
CLI = [sys.executable, "-c", "import runpy, sys; sys.argv[0] = 'vnetbench'; runpy.run_module('vnet' + 'bench', "
       "run_name='__main__')"]


def peak_of(argv: list[str]) -> tuple[float, float, int]:
    """(peak RSS MiB, seconds, exit code) of one child, from its own rusage (wait4)."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as errors:  # a file, not a pipe: a chatty child never blocks
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=errors)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        took = time.perf_counter() - started
        errors.seek(0)
        said = errors.read().decode(errors="replace")
    if code not in (0, 1) or "skipped" in said:
        sys.exit(f"{argv}: exit {code}: {said[-2000:]}")
    return usage.ru_maxrss / 1024, took, code


def real_record(folder: Path) -> dict:
    store = folder / "one.jsonl"
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    subprocess.run([sys.executable, "-m", "vnetbench", "run", "halo", "--ranks", "2", "--store", str(store)],
                   check=True, capture_output=True, timeout=300, env=env)
    return json.loads(store.read_text().splitlines()[0])


def build(store: Path, template: dict, count: int) -> None:
    with open(store, "w") as handle:
        for n in range(count):
            # 10 repetitions of each run, 4 topologies, a new parameter set every 400 records
            topology = dict(template["topology"], name=("native", "1vm", "2vm-1vswitch", "2vm-2vswitch")[n // 10 % 4])
            record = dict(template, run_id=f"{template['run_id']}-{n // 10}", repetition=n % 10,
                          topology=topology, params=dict(template["params"], steps=n // 400 + 1))
            handle.write(json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--keep", type=Path, help="build the store in DIR and leave it there")
    args = parser.parse_args()
    # beside this script, not in /tmp: test tiers running at the same time sweep /tmp of what they
    # did not expect there (processes too)
    build_dir = Path(__file__).resolve().parent / "build"
    build_dir.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="store-memory-", dir=build_dir) as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        store = folder / "results.jsonl"
        build(store, real_record(folder), args.records)
        size_mib = store.stat().st_size / 2**20
        base, _, _ = peak_of([sys.executable, "-c", "import vnetbench.analysis.report, vnetbench.cli"])
        report, report_s, _ = peak_of([*CLI, "report", "--store", str(store)])
        compare, compare_s, _ = peak_of([*CLI, "compare", str(store), str(store)])
    print(f"store: {args.records} records, {size_mib:.0f} MiB")
    print(f"reference (python importing vnetbench's analysis): {base:.0f} MiB peak RSS")
    print(f"report:  {report:.0f} MiB peak RSS ({report / base:.2f} x reference, {report / size_mib:.2f} x store), "
          f"{report_s:.1f} s")
    print(f"compare: {compare:.0f} MiB peak RSS ({compare / base:.2f} x reference, "
          f"{compare / size_mib:.2f} x store), {compare_s:.1f} s")


if __name__ == "__main__":
    main()
