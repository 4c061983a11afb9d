#!/usr/bin/env python3
"""How faithful the netns emulation is: shaped uplinks, unshaped bridges, latency, bring-up time.

    sudo .venv/bin/python benchmarks/fidelity.py             # 3 repetitions of each measurement
    sudo .venv/bin/python benchmarks/fidelity.py --markdown  # the table for docs/topologies.md
    sudo .venv/bin/python benchmarks/fidelity.py --json      # every sample
    sudo .venv/bin/python benchmarks/fidelity.py --kinds bridge,ovs,macvlan   # a row per switch kind instead

Targets (what the emulator promises), measured on copies of the presets named fidelity-PRESET:
- ping-pong between two VMs on separate 1 Gbit/s-uplinked switches (2vm-2vswitch) reaches 90-100%
  of the configured rate at 1 MiB (MB/s, M = 10^6; 1 Gbit/s = 125 MB/s);
- two VMs on one switch (2vm-1vswitch) reach at least 5x that;
- 8-byte latency between two VMs on one switch is under 50 us;
- bringing 4vm-4vswitch up and taking it down takes under 2 s.

With --kinds, a row per switch kind (switches/: bridge, ovs, macvlan) on fidelity-2vm-1vswitch-KIND and
fidelity-2vm-2vswitch-KIND, the kinds alternated in each repetition: 8-byte latency and 1 MiB bandwidth of MPI
(the pingpong kernel, osu-style) beside the raw limit of the same path between the same two VMs (a compiled
busy-polling TCP ping-pong, benchmarks/c/tcp_pingpong.c, pinned to the VMs' cpus), on one switch and across
two; the same bandwidth targets per kind.

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
    parser.add_argument("--kinds", metavar="K,K", help="a row per switch kind (bridge, ovs, macvlan) instead")
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


def private(preset: str, kind: str | None = None):
    """The preset's shape under a name of its own, so that runs of the preset elsewhere do not clash (with
    ``kind``: every switch of that kind, named fidelity-PRESET-KIND)."""
    from vnetbench.topologies.model import presets, spec

    data = {**presets.PRESETS[preset], "name": f"fidelity-{preset}" + (f"-{kind}" if kind else "")}
    if kind:
        data["switches"] = [{**sw, "kind": kind} for sw in data["switches"]]
    return spec.from_dict(data, source=f"preset {preset}")


# ---- a row per switch kind ---------------------------------------------------------------------

def tcp_binary(folder: str) -> str:
    import subprocess
    from pathlib import Path

    out = str(Path(folder) / "tcp_pingpong")
    subprocess.run(["gcc", "-O2", "-o", out, str(Path(__file__).parent / "c" / "tcp_pingpong.c")], check=True)
    return out


def raw_tcp(up, binary: str, size: int, iterations: int) -> dict:
    """The busy-polling TCP ping-pong between the topology's first and last VM, each pinned to its VM's cpus."""
    import subprocess

    first, last = up.layout.vms[0], up.layout.vms[-1]

    def inside(vm, *argv):
        return ["nsenter", f"--net=/run/netns/{vm.netns}", "taskset", "-c", ",".join(map(str, vm.cpus)), *argv]

    server = subprocess.Popen(inside(last, binary, "server", "5201", str(size), str(iterations)),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        client = subprocess.run(inside(first, binary, "client", last.address, "5201", str(size), str(iterations)),
                                capture_output=True, text=True, timeout=600)
        server.wait(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    if client.returncode != 0:
        raise RuntimeError(f"tcp_pingpong on {up.name}: {client.stderr.strip()[-300:]}")
    return json.loads(client.stdout)


def one_kind(args, topology, binary: str, bandwidth: dict, where: str, attempts: int = 3) -> dict:
    """One sample of a kind on ``topology``. The machine is shared: a run another process broke (a foreign
    cleanup removing the topology's links) is tried again, at most ``attempts`` times, and the sample says so."""
    from vnetbench import topologies
    from vnetbench.core.errors import VnetbenchError

    failures = []
    for _ in range(attempts):
        try:
            with topologies.realise(topology) as up:
                wait_quiet(args.quiet_wait)
                sample = {
                    "tcp_8b": raw_tcp(up, binary, 8, 5000),
                    "tcp_1mib": raw_tcp(up, binary, 1 << 20, 20),
                    "mpi_8b": pingpong(up, 8, 1, 0, iterations=3000, warmup=300, bw_iterations=10)[0],
                    "mpi_1mib": pingpong(up, 1 << 20, 1, 0, **bandwidth)[0],
                    "switches": up.describe()["switches"],
                    "failed_attempts": failures,
                }
        except (RuntimeError, VnetbenchError) as exc:
            failures.append(str(exc)[:300])
            continue
        if where == "two":
            sample["rate_mbps"] = topology.switches[0].uplink.rate / 8 / 1e6
        return sample
    raise RuntimeError(f"{topology.name}: {attempts} attempts failed: {failures[-1]}")


def measure_kinds(args, kinds: list[str]) -> dict:
    import tempfile

    bandwidth = {"large_iterations": 10, "large_warmup": 2, "bw_iterations": 20, "window": 16}
    samples = {kind: {"one": [], "two": []} for kind in kinds}
    with tempfile.TemporaryDirectory() as folder:
        binary = tcp_binary(folder)
        for _ in range(args.repeat):
            for kind in kinds:  # alternated: the machine's load falls on every kind alike
                for where, preset in (("one", "2vm-1vswitch"), ("two", "2vm-2vswitch")):
                    samples[kind][where].append(one_kind(args, private(preset, kind), binary, bandwidth, where))
    median = statistics.median
    summary = {}
    for kind in kinds:
        one, two = samples[kind]["one"], samples[kind]["two"]
        row = {where: {"tcp_8b_us": median(s["tcp_8b"]["one_way_us_p50"] for s in runs),
                       "tcp_1mib_mbps": median(s["tcp_1mib"]["mbps"] for s in runs),
                       "mpi_8b_us": median(s["mpi_8b"]["latency_us"] for s in runs),
                       "mpi_8b_p50_us": median(s["mpi_8b"]["latency_p50_us"] for s in runs),
                       "mpi_1mib_mbps": median(s["mpi_1mib"]["bandwidth_mbps"] for s in runs)}
               for where, runs in (("one", one), ("two", two))}
        rate = two[0]["rate_mbps"]
        row["rate_mbps"] = rate
        row["shaped_fraction"] = row["two"]["mpi_1mib_mbps"] / rate
        row["unshaped_over_shaped"] = row["one"]["mpi_1mib_mbps"] / row["two"]["mpi_1mib_mbps"]
        row["datapath"] = one[0]["switches"][0].get("datapath")
        row["met"] = {key: _within(row[key], *TARGETS[key]) for key in ("shaped_fraction", "unshaped_over_shaped")}
        summary[kind] = row
    return {"samples": samples, "summary": summary, "met": {kind: all(summary[kind]["met"].values())
                                                            for kind in kinds}}


def kinds_table(results: dict, markdown: bool) -> str:
    head = ["switch kind", "1 switch: TCP 8 B", "MPI 8 B", "TCP 1 MiB", "MPI 1 MiB",
            "2 switches: TCP 8 B", "MPI 8 B", "MPI 1 MiB (of the uplink's rate)", "targets"]
    rows = []
    for kind, r in results["summary"].items():
        one, two = r["one"], r["two"]
        name = kind + (f" ({r['datapath']})" if r["datapath"] else "")
        met = ", ".join(f"{key}: {'met' if ok else 'MISSED'}" for key, ok in r["met"].items())
        rows.append([name, f"{one['tcp_8b_us']:.1f} us", f"{one['mpi_8b_us']:.1f} us (p50 {one['mpi_8b_p50_us']:.1f})",
                     f"{one['tcp_1mib_mbps']:.0f} MB/s", f"{one['mpi_1mib_mbps']:.0f} MB/s",
                     f"{two['tcp_8b_us']:.1f} us", f"{two['mpi_8b_us']:.1f} us (p50 {two['mpi_8b_p50_us']:.1f})",
                     f"{two['mpi_1mib_mbps']:.1f} MB/s ({100 * r['shaped_fraction']:.0f}% of {r['rate_mbps']:.0f})",
                     met])
    if markdown:
        return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                         + ["| " + " | ".join(row) + " |" for row in rows])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    return "\n".join("  ".join(str(x).ljust(w) for x, w in zip(line, widths)) for line in [head, *rows])


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
    kinds = [kind for kind in (args.kinds or "").split(",") if kind]
    try:
        results = measure_kinds(args, kinds) if kinds else measure(args)
    except RuntimeError as exc:
        print(f"fidelity.py: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        print(kinds_table(results, args.markdown) if kinds else table(results, args.markdown))
    return 0 if all(results["met"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
