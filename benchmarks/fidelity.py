#!/usr/bin/env python3
"""How faithful the netns emulation is: shaped uplinks, unshaped bridges, latency, bring-up time.

    sudo .venv/bin/python benchmarks/fidelity.py             # 3 repetitions of each measurement
    sudo .venv/bin/python benchmarks/fidelity.py --markdown  # the table for docs/topologies.md
    sudo .venv/bin/python benchmarks/fidelity.py --json      # every sample

Targets (what the emulator promises), measured on copies of the presets named fidelity-PRESET:
- ping-pong between two VMs on separate 1 Gbit/s-uplinked switches (2vm-2vswitch) reaches 90-100%
  of the configured rate at 1 MiB (MB/s, M = 10^6; 1 Gbit/s = 125 MB/s);
- two VMs on one switch (2vm-1vswitch) reach at least 5x that;
- 8-byte latency between two VMs on one switch is under 50 us;
- bringing 4vm-4vswitch up and taking it down takes under 2 s.

Needs root (it brings topologies up). Exit 0 when every target is met, 1 when one is missed or a
run failed, 2 when it cannot run (not root, a topology it needs is already up).
"""

import argparse
import json
import statistics
import sys
import time

TARGETS = {
    "shaped_fraction": (0.90, 1.00),
    "unshaped_over_shaped": (5.0, None),
    "latency_8b_us": (None, 50.0),
    "up_down_s": (None, 2.0),
}


def parse(argv):
    parser = argparse.ArgumentParser(prog="fidelity.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, metavar="R", help="repetitions of each measurement (default 3)")
    parser.add_argument("--quiet-wait", type=float, default=30.0, metavar="S",
                        help="before each measurement, wait up to S s for the cpus to be mostly idle (default 30)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--markdown", action="store_true", help="print the table as markdown")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat: must be >= 1")
    return args


def idle_fraction(seconds: float = 0.5) -> float:
    def sample():
        fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
        return fields[3] + fields[4], sum(fields)
    idle0, total0 = sample()
    time.sleep(seconds)
    idle1, total1 = sample()
    return (idle1 - idle0) / max(1, total1 - total0)


def wait_quiet(limit: float) -> float:
    """Wait (at most ``limit`` s) for other work to leave the cpus mostly idle; the idle fraction seen."""
    deadline = time.monotonic() + limit
    idle = idle_fraction()
    while idle < 0.8 and time.monotonic() < deadline:
        idle = idle_fraction()
    return idle


def pingpong(up, size: int, repeat: int, quiet: float, **options) -> list[dict]:
    from vnetbench import engine

    params = {"min_size": size, "max_size": size, **options}
    samples = []
    for _ in range(repeat):
        idle = wait_quiet(quiet)
        record = engine.run_kernel("pingpong", params, 2, realised=up)[0]
        if record["status"] != "ok":
            raise RuntimeError(f"pingpong on {up.name} did not pass: {record['validation']['detail']}")
        sample = record["metrics"]["sizes"][-1]
        samples.append({"bandwidth_mbps": sample["bandwidth_mbps"], "latency_us": sample["latency_us"],
                        "latency_p50_us": sample["latency_p50_us"], "idle_before": round(idle, 3),
                        "yield_when_idle": "yield_when_idle" in record["launch"]["notes"]})
    return samples


def bring_up_and_down(repeat: int, quiet: float) -> list[dict]:
    from vnetbench.topologies.netns import life

    topology = private("4vm-4vswitch")
    samples = []
    for _ in range(repeat):
        wait_quiet(quiet)
        start = time.perf_counter()
        _, created = life.up(topology, persistent=True)
        up = time.perf_counter()
        life.down(topology.id)
        down = time.perf_counter()
        if not created:
            raise RuntimeError(f"{topology.name} was already up")
        samples.append({"up_s": up - start, "down_s": down - up, "total_s": down - start})
    return samples


def private(preset: str):
    """The preset's shape under a name of its own, so that runs of the preset elsewhere do not clash."""
    from vnetbench.topologies.model import presets, spec

    return spec.from_dict({**presets.PRESETS[preset], "name": f"fidelity-{preset}"}, source=f"preset {preset}")


def measure(args) -> dict:
    from vnetbench import topologies
    from vnetbench.topologies.thishost import state

    for name in ("2vm-2vswitch", "2vm-1vswitch", "4vm-4vswitch"):
        if state.read(private(name).id) is not None:
            raise SystemExit(f"fidelity.py: fidelity-{name} is up; take it down first "
                             f"(vnetbench topology cleanup --all, or vnetbench topology down fidelity-{name})")
    bandwidth = {"large_iterations": 10, "large_warmup": 4, "bw_iterations": 50, "window": 64}
    results = {"samples": {}}
    shaped_topology = private("2vm-2vswitch")
    rate = shaped_topology.switches[0].uplink.rate / 8 / 1e6
    with topologies.realise(shaped_topology) as up:
        results["samples"]["shaped_1mib"] = pingpong(up, 1 << 20, args.repeat, args.quiet_wait, **bandwidth)
    with topologies.realise(private("2vm-1vswitch")) as up:
        results["samples"]["unshaped_1mib"] = pingpong(up, 1 << 20, args.repeat, args.quiet_wait, **bandwidth)
        results["samples"]["latency_8b"] = pingpong(up, 8, args.repeat, args.quiet_wait, iterations=20000,
                                                    warmup=1000, bw_iterations=10)
    results["samples"]["up_down"] = bring_up_and_down(max(5, args.repeat), args.quiet_wait)
    median = statistics.median
    shaped = median(s["bandwidth_mbps"] for s in results["samples"]["shaped_1mib"])
    unshaped = median(s["bandwidth_mbps"] for s in results["samples"]["unshaped_1mib"])
    latency = median(s["latency_us"] for s in results["samples"]["latency_8b"])
    latency_p50 = median(s["latency_p50_us"] for s in results["samples"]["latency_8b"])
    updown = results["samples"]["up_down"]
    results["summary"] = {
        "configured_rate_mbps": rate,
        "shaped_mbps": shaped, "shaped_fraction": shaped / rate,
        "unshaped_mbps": unshaped, "unshaped_over_shaped": unshaped / shaped,
        "latency_8b_us": latency, "latency_8b_p50_us": latency_p50,
        "up_s": median(s["up_s"] for s in updown), "down_s": median(s["down_s"] for s in updown),
        "up_down_s": max(s["total_s"] for s in updown),
    }
    results["met"] = {key: _within(results["summary"][key], *bounds) for key, bounds in TARGETS.items()}
    return results


def _within(value, low, high) -> bool:
    return (low is None or value >= low) and (high is None or value <= high)


def table(results: dict, markdown: bool) -> str:
    s, met = results["summary"], results["met"]
    rows = [
        ("1 MiB ping-pong, 2 VMs, separate 1 Gbit/s-uplinked switches",
         f"{s['shaped_mbps']:.1f} MB/s = {100 * s['shaped_fraction']:.1f}% of {s['configured_rate_mbps']:.0f}",
         "90-100% of the rate", met["shaped_fraction"]),
        ("1 MiB ping-pong, 2 VMs, one switch (unshaped)",
         f"{s['unshaped_mbps']:.1f} MB/s = {s['unshaped_over_shaped']:.1f}x the shaped", ">= 5x",
         met["unshaped_over_shaped"]),
        ("8 B latency, 2 VMs, one switch",
         f"{s['latency_8b_us']:.1f} us (median {s['latency_8b_p50_us']:.1f} us)", "< 50 us", met["latency_8b_us"]),
        ("4vm-4vswitch up + down", f"{s['up_s']:.2f} s + {s['down_s']:.2f} s (slowest total "
                                   f"{s['up_down_s']:.2f} s)", "< 2 s", met["up_down_s"]),
    ]
    if markdown:
        lines = ["| measurement | measured | target | met |", "|---|---|---|---|"]
        lines += [f"| {a} | {b} | {c} | {'yes' if d else 'NO'} |" for a, b, c, d in rows]
        return "\n".join(lines)
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{a.ljust(width)}  {b}  [{c}: {'met' if d else 'MISSED'}]" for a, b, c, d in rows)


def main(argv=None) -> int:
    import os

    args = parse(sys.argv[1:] if argv is None else argv)
    if os.geteuid() != 0:
        print("fidelity.py: needs root (it brings netns topologies up)", file=sys.stderr)
        return 2
    try:
        results = measure(args)
    except RuntimeError as exc:
        print(f"fidelity.py: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        print(table(results, args.markdown))
    return 0 if all(results["met"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
