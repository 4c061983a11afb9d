#!/usr/bin/env python3
"""What md's PME and LAMMPS's PPPM put on the wire per step at 2 ranks: bytes and packets between two emulated VMs.

    sudo .venv/bin/python benchmarks/md_pme_wire.py            # md_fidelity.py's two PME physics
    sudo .venv/bin/python benchmarks/md_pme_wire.py --json

Why md_fidelity.py --pme's gaps are what they are: each code runs on a private copy of 2vm-1vswitch (one VM a
rank), and the counters of the first VM's network interface (its /proc/net/dev: every byte between the two ranks
passes it, both directions) are read before and after each run. A run of S steps and one of 2S steps differ by S
steps only (launch, set-up, the first ghost exchange and the record are in both), so their difference over S is one
step's traffic. Codes: md with --pme-fft r2c (GROMACS's and NAMD's FFT scheme) and c2c (LAMMPS's), LAMMPS with PPPM
`diff ad` (one forward and one inverse FFT, as md_fidelity.py runs it) and `diff ik` (LAMMPS's default: one forward,
three inverse, three field components in the ghost exchange), and LAMMPS with the same pairs and no mesh
(lj/cut/coul/cut): what PPPM adds is the difference. md's own metrics say the same from inside (pme_transpose_bytes,
pme_halo_bytes: payload, no headers), per evaluation.

Needs root. Exit 0 when every run went through, 1 when one failed, 2 when it cannot run.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from md_common import (IN_PME, LOOP, BenchError, lammps, pme_problem, pme_vars, retried, run_md_pme,  # noqa: E402
                       same_mpi, scratch, vnetbench)
from md_fidelity import PHYSICS_PME, standing  # noqa: E402

# the same pairs, charges and ghosts as IN_PME, and no mesh: the Coulomb sum cut at the cutoff
IN_SHORT = (IN_PME.replace("pair_style lj/cut/coul/long ${rc}", "pair_style lj/cut/coul/cut ${rc}")
            .replace("kspace_style pppm 1e-5\n", "").replace(
                "kspace_modify mesh ${gx} ${gy} ${gz} order ${order} gewald ${g} diff ${diff}\n", "")
            .replace("thermo_style custom step temp pe ecoul elong etotal", "thermo_style custom step temp pe etotal"))
CASES = ("md r2c", "md c2c", "LAMMPS pppm ad", "LAMMPS pppm ik", "LAMMPS no mesh")


def counters(netns: str) -> tuple[int, int]:
    """(bytes, packets) through the namespace's one interface besides lo, received plus sent."""
    text = subprocess.run(["ip", "netns", "exec", netns, "cat", "/proc/net/dev"], capture_output=True, text=True,
                          check=True, timeout=30).stdout
    rows = [line.split(":", 1) for line in text.splitlines() if ":" in line]
    links = [(name.strip(), values.split()) for name, values in rows if name.strip() != "lo"]
    if len(links) != 1:
        raise BenchError(f"{netns}: expected one interface besides lo, found {[name for name, _ in links]}")
    v = links[0][1]
    return int(v[0]) + int(v[8]), int(v[1]) + int(v[9])


def private_file(preset: str, directory: Path) -> str:
    """The preset's shape under the name mdwire-PRESET (md_fidelity.py's copies are mdfid-: the two may run at once)."""
    import yaml

    from vnetbench.topologies.model import presets as known

    path = directory / f"mdwire-{preset}.yaml"
    path.write_text(yaml.safe_dump({**known.PRESETS[preset], "name": f"mdwire-{preset}"}))
    return str(path)


def first_netns(spec: str) -> str:
    from vnetbench.topologies.thishost import fabric

    done = subprocess.run([vnetbench(), "topology", "show", spec, "--json"], capture_output=True, text=True,
                          check=True, timeout=60)
    shown = json.loads(done.stdout)
    return f"{fabric.PREFIX}-{shown['plan']['id']}-{shown['spec']['vms'][0]['name']}"


def run_lammps(spec: str, p: dict, infile: Path, diff: str, mpi: str, steps: int) -> dict:
    argv = [vnetbench(), "exec", "--topology", spec, "--ranks", "2", "--timeout", "900", "--mpi", mpi, "--",
            lammps(), "-in", str(infile), *pme_vars(p, steps), "-var", "diff", diff, "-log", "none"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=930, cwd=infile.parent)
    found = LOOP.search(done.stdout)
    if done.returncode != 0 or not found or int(found[3]) != steps:
        raise BenchError(f"LAMMPS ({infile.name}, diff {diff}) failed (exit {done.returncode}): "
                         f"{(done.stderr or done.stdout)[-800:]}")
    return {"loop_s": float(found[1])}


def one(case: str, spec: str, netns: str, p: dict, steps: int, files: dict, store: Path, mpi: str, log) -> dict:
    """One run of ``case``: the traffic through the first VM's interface, and md's own counts."""
    before = counters(netns)
    if case.startswith("md"):
        out = retried(lambda: run_md_pme(spec, 2, {**p, "steps": steps, "fft": case.split()[1]}, store, mpi), log)
        m = out["metrics"]
        extra = {"loop_s": out["loop_s"], "pme_evaluations": m["pme_evaluations"],
                 "pme_transpose_bytes": m["pme_transpose_bytes"], "pme_halo_bytes": m["pme_halo_bytes"]}
    elif case == "LAMMPS no mesh":
        extra = retried(lambda: run_lammps(spec, p, files["short"], "ad", mpi, steps), log)
    else:
        extra = retried(lambda: run_lammps(spec, p, files["pme"], case.split()[-1], mpi, steps), log)
    after = counters(netns)
    return {"bytes": after[0] - before[0], "packets": after[1] - before[1], **extra}


def measure(args, log) -> dict:
    mpi = same_mpi()
    result = {"mpi": mpi, "ranks": 2, "topology": "2vm-1vswitch", "steps": args.steps, "physics": {}}
    with scratch("md-pme-wire-") as tmp:
        directory = Path(tmp)
        files = {"pme": directory / "in.pme", "short": directory / "in.short"}
        files["pme"].write_text(IN_PME)
        files["short"].write_text(IN_SHORT)
        spec = private_file("2vm-1vswitch", directory)
        store = directory / "results.jsonl"
        with standing([spec], log):
            netns = first_netns(spec)
            for physics, preset in args.problems.items():
                p = pme_problem(preset["cells"], preset["cutoff"], args.steps)
                rows = {}
                for case in CASES:
                    runs = {n: one(case, spec, netns, p, n, files, store, mpi, log) for n in (args.steps, 2 * args.steps)}
                    short, long = runs[args.steps], runs[2 * args.steps]
                    row = {"bytes_per_step": (long["bytes"] - short["bytes"]) / args.steps,
                           "packets_per_step": (long["packets"] - short["packets"]) / args.steps, "runs": runs}
                    if case.startswith("md"):
                        evaluations = long["pme_evaluations"] - short["pme_evaluations"]
                        row["pme_payload_per_evaluation"] = {
                            key: (long[f"pme_{key}_bytes"] - short[f"pme_{key}_bytes"]) / evaluations
                            for key in ("transpose", "halo")}
                    rows[case] = row
                    log(f"{physics}, {case}: {row['bytes_per_step'] / 1e6:.3f} MB and "
                        f"{row['packets_per_step']:.0f} packets per step")
                result["physics"][physics] = {"grid": p["grid"], "atoms": p["atoms"], "cutoff": p["cutoff"],
                                              "rows": rows}
    return result


def table(result) -> None:
    print(f"Traffic between 2 ranks on {result['topology']} (both directions, the first VM's interface), per step: "
          f"runs of {result['steps']} and {2 * result['steps']} steps, difference over {result['steps']}; "
          f"{result['duration_s']:.0f} s")
    print("| physics | grid | code | MB per step | packets per step | mesh MB per step (LAMMPS: over its run "
          "without mesh; md: its own count, payload) |")
    print("|---|---|---|---|---|---|")
    for physics, entry in result["physics"].items():
        rows = entry["rows"]
        bare = rows["LAMMPS no mesh"]["bytes_per_step"]
        for case, row in rows.items():
            if case.startswith("md"):
                load = row["pme_payload_per_evaluation"]
                mesh = (f"{(load['transpose'] + load['halo']) / 1e6:.3f} (transposes {load['transpose'] / 1e6:.3f}, "
                        f"halo {load['halo'] / 1e6:.3f})")
            elif case == "LAMMPS no mesh":
                mesh = "-"
            else:
                mesh = f"{(row['bytes_per_step'] - bare) / 1e6:.3f}"
            print(f"| {physics} | {'x'.join(map(str, entry['grid']))} | {case} | {row['bytes_per_step'] / 1e6:.3f} | "
                  f"{row['packets_per_step']:.0f} | {mesh} |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="md_pme_wire.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--physics", default=",".join(PHYSICS_PME),
                        help=f"presets, comma-separated, from: {'; '.join(PHYSICS_PME)} (default: both)")
    parser.add_argument("--steps", type=int, default=20, help="S: runs of S and 2S steps (default 20)")
    parser.add_argument("--json", action="store_true", help="print one JSON document with every run")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    names = [name.strip() for name in args.physics.split(",") if name.strip()]
    unknown = [name for name in names if name not in PHYSICS_PME]
    if unknown or not names:
        parser.error(f"--physics: {(unknown or [''])[0]!r} is not allowed; choose from {'; '.join(PHYSICS_PME)}")
    if args.steps < 1:
        parser.error(f"--steps: {args.steps} is not allowed; use a whole number >= 1")
    args.problems = {name: PHYSICS_PME[name] for name in names}
    if os.geteuid() != 0:
        print("md_pme_wire: needs root (it brings a netns topology up)", file=sys.stderr)
        return 2
    started = time.time()
    try:
        result = measure(args, lambda text: print(f"md_pme_wire: {text}", file=sys.stderr, flush=True))
    except (BenchError, subprocess.SubprocessError) as exc:
        print(f"md_pme_wire: error: {exc}", file=sys.stderr)
        return 1
    result["duration_s"] = round(time.time() - started, 1)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
