"""Peak memory of ``vnetbench report`` and ``compare`` on stores of 10,000 and 100,000 records.

Each store is built from one real record (a halo run on this machine, through the CLI) copied
with new run ids, repetitions, topologies and parameter sets, so each line has a real record's
size and shape. Prints each store's size, each command's own peak resident memory (VmHWM of its
address space, read as it exits: ru_maxrss would carry the forking parent's high-water mark into
the child) and time, the reference (a Python that only imports vnetbench's analysis), and the
ratio of the largest store's peak to the smallest's: about 1 when memory does not grow with the store.

    python benchmarks/store_memory.py [--records 10000 100000] [--keep DIR]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# run as the command's own process, so its VmHWM is the command's alone; the CLI without its name in
# the argv: on a shared machine other test tiers end stray processes called vnetbench
MEASURED = ("import re, runpy, sys\n"
            "hwm, sys.argv = sys.argv[1], ['vnetbench', *sys.argv[2:]]\n"
            "try:\n"
            "    runpy.run_module('vnet' + 'bench', run_name='__main__')\n"
            "finally:\n"
            "    status = open('/proc/self/status').read()\n"
            "    open(hwm, 'w').write(re.search(r'VmHWM:\\s+(\\d+)', status).group(1))\n")


def own_peak(args: list, folder: Path, timeout: float = 1800) -> tuple[float, float, int, str, str]:
    """(peak resident MiB, seconds, exit code, stdout, stderr) of ``vnetbench ARGS`` in a child of its own."""
    hwm = folder / "vmhwm"
    hwm.unlink(missing_ok=True)
    started = time.perf_counter()
    # files, not pipes: a chatty child never blocks
    with tempfile.TemporaryFile() as output, tempfile.TemporaryFile() as errors:
        proc = subprocess.run([sys.executable, "-c", MEASURED, str(hwm), *map(str, args)],
                              stdout=output, stderr=errors, timeout=timeout)
        took = time.perf_counter() - started
        said = []
        for handle in (output, errors):
            handle.seek(0)
            said.append(handle.read().decode(errors="replace"))
    return int(hwm.read_text()) / 1024, took, proc.returncode, *said


def reference_peak() -> float:
    """Peak resident MiB of a Python that imports vnetbench's analysis and CLI and does nothing."""
    code = ("import re, vnetbench.analysis.report, vnetbench.analysis.digest, vnetbench.cli\n"
            "print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))")
    return int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              timeout=120).stdout) / 1024


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


def measure(store: Path, folder: Path) -> dict:
    out = {}
    for name, args in (("report", ["report", "--store", store]), ("compare", ["compare", store, store])):
        peak, took, code, _, said = own_peak(args, folder)
        if code not in (0, 1) or "skipped" in said:
            sys.exit(f"{name} on {store}: exit {code}: {said[-2000:]}")
        out[name] = (peak, took)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--keep", type=Path, help="build the stores in DIR and leave them there")
    args = parser.parse_args()
    # beside this script, not in /tmp: test tiers running at the same time sweep /tmp of what they
    # did not expect there (processes too)
    build_dir = Path(__file__).resolve().parent / "build"
    build_dir.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="store-memory-", dir=build_dir) as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        template = real_record(folder)
        base = reference_peak()
        print(f"reference (python importing vnetbench's analysis): {base:.0f} MiB peak resident (VmHWM)")
        results = {}
        for count in args.records:
            store = folder / f"results-{count}.jsonl"
            build(store, template, count)
            results[count] = measure(store, folder)
            print(f"store of {count} records, {store.stat().st_size / 2**20:.0f} MiB:")
            for name, (peak, took) in results[count].items():
                print(f"  {name:8s}{peak:6.0f} MiB peak resident ({peak - base:+.0f} MiB over the reference), "
                      f"{took:.1f} s")
        if len(results) > 1:
            low, high = min(results), max(results)
            for name in ("report", "compare"):
                print(f"{name}: peak at {high} records / peak at {low} records = "
                      f"{results[high][name][0] / results[low][name][0]:.2f}")


if __name__ == "__main__":
    main()
