#!/usr/bin/env python3
"""What the qemu backend's TCG-only settings save: a guest booted as the backend boots one, with and without them.

Under TCG (an emulated CPU: timings N/A, the guests there for behaviour) the backend boots its guests with
``TCG_KERNEL_OPTIONS`` (the guest's kernel leaves the pages it allocates unzeroed) and ``TCG_QEMU_OPTIONS`` (QEMU
handles a virtqueue kick in the vCPU thread that emulates it, without an ioeventfd waking its main loop), both in
topologies/qemu/guests.py. This script boots a 1-vCPU, 512 MiB guest of the backend's kernel and blacklist
through virtme-run, three ways alternated (the order turned every repetition): neither setting, the kernel options
alone, and both (the backend's own TCG guest). In each the guest imports numpy and numba twice with this Python,
over the host's root as a 9p share, the reads that ranks' imports make. It prints, per way, the CPU seconds QEMU
used (its launcher's children's), the guest's uptime when its command began (the boot) and when it ended, and the
CPU against the first way's, medians over the repetitions with their ranges.

    python benchmarks/tcg_guest.py [--repeat 3]

Exit codes: 0 every boot ended with its command done, 1 one did not, 2 it cannot run here (no QEMU, virtme-run or
kernel). Each guest is QEMU's own session, ended whatever happens.
"""

import argparse
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import time

from vnetbench.core.errors import UsageError
from vnetbench.core.procs import kill_session
from vnetbench.topologies.qemu import machine
from vnetbench.topologies.qemu.guests import TCG_KERNEL_OPTIONS, TCG_QEMU_OPTIONS, UNUSED_MODULES

WAYS = {"neither": ((), ()), "kernel options": (TCG_KERNEL_OPTIONS, ()),
        "both (the backend's)": (TCG_KERNEL_OPTIONS, TCG_QEMU_OPTIONS)}
TIMEOUT_S = 600
MARK = "vnb-tcg-guest"


def argv(image: str, kernel_options, qemu_options) -> list[str]:
    python = shlex.quote(sys.executable)
    imports = f"{python} -c 'import numpy, numba'"
    script = (f"echo {MARK} began $(cut -d' ' -f1 /proc/uptime); {imports} && {imports} "
              f"&& echo {MARK} ended $(cut -d' ' -f1 /proc/uptime)")
    words = [machine.virtme_run(), "--kimg", image, "--mods", "auto", "--disable-microvm", "--force-9p",
             "--memory", "512M", "--cpus", "1", "--disable-kvm",
             "--kopt", f"modprobe.blacklist={','.join(UNUSED_MODULES)}",
             *(word for option in kernel_options for word in ("--kopt", option)), "--script-sh", script]
    return words + (["--qemu-opts", *qemu_options] if qemu_options else [])


def boot(image: str, way: str) -> dict:
    """One guest's run: QEMU's CPU seconds, the guest's uptime at its command's start and end (None: not reached)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(argv(image, *WAYS[way]), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        out = ""
    finally:
        kill_session(proc.pid, grace=1.0)
        proc.wait()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    seen = {}
    for line in out.splitlines():
        words = line.split()
        if len(words) == 3 and words[0] == MARK:
            seen[words[1]] = float(words[2])
    return {"cpu": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
            "began": seen.get("began"), "ended": seen.get("ended"), "tail": out.splitlines()[-3:]}


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):6.1f} ({min(values):.1f}-{max(values):.1f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="boots of each way (default 3)")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat: at least 1")
    try:
        if not machine.virtme_run():
            raise UsageError("needs virtme-run (pip install 'vnetbench[qemu]')")
        if not shutil.which("qemu-system-x86_64"):
            raise UsageError("needs qemu-system-x86_64 (apt-get install qemu-system-x86)")
        image = machine.kernel(None)["image"]
    except UsageError as exc:
        print(f"tcg_guest: {exc}", file=sys.stderr)
        return 2
    started, runs, failed = time.monotonic(), {way: [] for way in WAYS}, []
    for rep in range(args.repeat):
        order = list(WAYS)[rep % len(WAYS):] + list(WAYS)[:rep % len(WAYS)]
        for way in order:
            run = boot(image, way)
            print(f"tcg_guest: {way} {rep + 1}/{args.repeat}: {run['cpu']:.1f} CPU-s, command began at "
                  f"{run['began']} s, ended at {run['ended']} s", file=sys.stderr, flush=True)
            if run["ended"] is None:
                failed.append(f"{way} {rep + 1}: " + " | ".join(run["tail"]))
            else:
                runs[way].append(run)
    print(f"python benchmarks/tcg_guest.py --repeat {args.repeat}  |  {image}, QEMU {machine.qemu_version()}, TCG, "
          f"1 vCPU, 512 MiB; each guest imports numpy and numba twice; medians (ranges) of {args.repeat}, "
          f"{time.monotonic() - started:.0f} s")
    print(f"{'way':22} {'QEMU CPU-s':>18} {'command began, s':>18} {'ended, s':>18}  CPU against neither")
    base = statistics.median(r["cpu"] for r in runs["neither"]) if runs["neither"] else None
    for way, done in runs.items():
        if not done:
            print(f"{way:22} no boot ended")
            continue
        cpu = [r["cpu"] for r in done]
        ratio = f"{statistics.median(cpu) / base:.2f}" if base else "-"
        print(f"{way:22} {spread(cpu):>18} {spread([r['began'] for r in done]):>18} "
              f"{spread([r['ended'] for r in done]):>18}  {ratio}")
    for line in failed:
        print(f"not ended: {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
