#!/usr/bin/env python3
"""The study's "1 VM, no network" overhead on a KVM host: native against 1vm emulated (a namespace and cgroup) and
1vm as a real QEMU/KVM guest (``--vms qemu``), for md, stream and pingpong, in the same run; prints ratios.

    sudo .venv/bin/python benchmarks/qemu_overhead.py                # 3 repetitions of each side, interleaved
    sudo .venv/bin/python benchmarks/qemu_overhead.py --repeat 5 --json

Each repetition runs native, 1vm emulated and 1vm qemu one after the other, the order turned every
repetition, each through ``vnetbench run`` with the same kernel options and the same number of ranks (the 1vm
preset's vCPUs: half this host's cpus); the best repetition of each side counts (load elsewhere only slows a
run down). The qemu side's guest is brought up once (``topology up 1vm --vms qemu --accel kvm``), so its boot
is not timed. A ratio is the side's value against native's, so above 1 is slower for times and faster for
bandwidths; the columns say which.
On a host where KVM cannot run guests (no /dev/kvm, no permission, or a probe guest that does not boot, as on
the machines vnetbench is developed on) it prints "no KVM here" and why: TCG timings are no hypervisor's cost.
``--tcg-smoke`` runs the same path with TCG guests and tiny kernel sizes, to check this script where KVM is
missing: its numbers are labelled as what they are, an emulated CPU's, and mean nothing.
Exit 0 when every run passed, 1 when one failed, 2 when it cannot run (no KVM, not root, no QEMU).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# kernel -> (its options: seconds per run on a small host, the study's working sizes otherwise untouched,
#            the metrics compared: record metric name -> shown as)
KERNELS = {
    "md": (["--cells", "20", "--steps", "50"], {"elapsed_s": "md elapsed s"}),
    "stream": (["--array-size", "20000000", "--ntimes", "10"], {"bandwidth_mbps.triad": "stream triad MB/s"}),
    "pingpong": (["--max-size", "1048576", "--iterations", "2000"],
                 {"latency_us@8B": "pingpong 8 B latency us", "bandwidth_mbps@1048576B": "pingpong 1 MiB MB/s"}),
}
SMOKE = {"md": ["--cells", "4", "--steps", "5"], "stream": ["--array-size", "100000", "--ntimes", "2"],
         "pingpong": ["--max-size", "1048576", "--iterations", "10", "--large-iterations", "2", "--bw-iterations", "5"]}
SIDES = ("native", "1vm emulated", "1vm qemu")
RUN_TIMEOUT = 900


def vnetbench(*args, timeout: float = RUN_TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vnetbench", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def cannot(accel: str) -> str | None:
    """Why guests of ``accel`` cannot be measured here, or None."""
    from vnetbench.core.errors import UsageError
    from vnetbench.topologies.qemu import life, machine, model

    if os.geteuid() != 0:
        return "not root: guests need taps and bridges"
    try:
        machine.require()
        life.guest(model.load(f"qemu:1vm?accel={accel}"))  # the KVM probe of 1vm's guest (kept for this boot)
    except UsageError as exc:
        return str(exc)
    return None


def ref(side: str, accel: str) -> list[str]:
    return {"native": ["--topology", "native"], "1vm emulated": ["--topology", "1vm"],
            "1vm qemu": ["--topology", "1vm", "--vms", "qemu", "--accel", accel]}[side]


def values(record: dict, wanted: dict) -> dict:
    from vnetbench.analysis import metrics

    found = {metric.name: value for metric, value in metrics.extract(record)}
    return {name: found.get(name) for name in wanted}


def measure(args, log) -> dict:
    from vnetbench import topologies

    ranks = max(2, topologies.load("1vm").vms[0].vcpus)  # the preset scaled to this host; pingpong needs 2
    samples = {kernel: {side: [] for side in SIDES} for kernel in args.kernels}
    failed = []
    up = vnetbench("topology", "up", "1vm", "--vms", "qemu", "--accel", args.accel, timeout=400)
    if up.returncode != 0:
        raise SystemExit(f"topology up 1vm --vms qemu --accel {args.accel} failed: {up.stderr.strip()[-500:]}")
    try:
        with tempfile.TemporaryDirectory(prefix="vnb-qemu-overhead-") as tmp:
            store = Path(tmp) / "results.jsonl"
            for rep in range(args.repeat):
                order = SIDES if rep % 2 == 0 else tuple(reversed(SIDES))
                for kernel in args.kernels:
                    options, wanted = KERNELS[kernel]
                    # under TCG a guest's ranks compile their numba loops for minutes
                    options = [*SMOKE[kernel], "--timeout", "900"] if args.accel == "tcg" else options
                    for side in order:
                        began = time.monotonic()
                        done = vnetbench("run", kernel, *ref(side, args.accel), "--ranks", ranks, "--json",
                                         "--store", store,
                                         *options)
                        records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
                        ok = done.returncode == 0 and records and records[0]["status"] == "ok"
                        if not ok:
                            failed.append(f"{kernel} on {side}: {done.stderr.strip()[-300:]}")
                        else:
                            samples[kernel][side].append(values(records[0], wanted))
                        log(f"rep {rep + 1}/{args.repeat} {kernel:8} {side:13} {time.monotonic() - began:6.1f} s"
                            + ("" if ok else " FAILED"))
    finally:
        vnetbench("topology", "down", "1vm-qemu", timeout=120)
    return {"ranks": ranks, "samples": samples, "failed": failed}


def best(values: list[float], better: str) -> float | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return min(values) if better == "lower" else max(values)


def table(result: dict) -> list[list[str]]:
    rows = []
    for kernel, by_side in result["samples"].items():
        _, wanted = KERNELS[kernel]
        for name, shown in wanted.items():
            better = "higher" if "MB/s" in shown else "lower"
            got = {side: best([s[name] for s in by_side[side]], better) for side in SIDES}
            base = got["native"]
            ratio = {side: (got[side] / base if base and got[side] is not None else None) for side in SIDES[1:]}
            rows.append([shown, *(f"{got[s]:.4g}" if got[s] is not None else "-" for s in SIDES),
                         *(f"{ratio[s]:.3f}" if ratio[s] is not None else "-" for s in SIDES[1:])])
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="qemu_overhead.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of each side (default 3)")
    parser.add_argument("--kernels", default="md,stream,pingpong", help="comma-separated (default md,stream,pingpong)")
    parser.add_argument("--json", action="store_true", help="print one JSON document with every sample")
    parser.add_argument("--tcg-smoke", action="store_true",
                        help="check this script without KVM: TCG guests, tiny sizes, numbers that mean nothing")
    args = parser.parse_args(argv)
    args.accel = "tcg" if args.tcg_smoke else "kvm"
    args.kernels = args.kernels.split(",")
    unknown = [k for k in args.kernels if k not in KERNELS]
    if unknown or args.repeat < 1:
        parser.error(f"--kernels: {unknown[0]!r} is not one of {', '.join(KERNELS)}" if unknown
                     else "--repeat: use a whole number >= 1")
    why = cannot(args.accel)
    if why:
        print(f"no KVM here: {why}" if args.accel == "kvm" else f"no guests here: {why}")
        return 2
    result = measure(args, lambda line: print(line, file=sys.stderr, flush=True))
    result["accel"] = args.accel
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        headers = ["metric", *SIDES, "emulated / native", "qemu / native"]
        rows = table(result)
        widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
        if args.tcg_smoke:
            print("TCG smoke run: QEMU emulated the guest's CPU; these numbers are no hypervisor's timing")
        print(f"{result['ranks']} rank(s), best of {args.repeat} repetition(s) per side")
        for row in [headers, *rows]:
            print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)))
        for line in result["failed"]:
            print(f"FAILED: {line}")
    return 1 if result["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
