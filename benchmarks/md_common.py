"""What md_speed.py, md_pme_speed.py and md_fidelity.py share: the LAMMPS inputs for md's problems (Lennard-Jones,
and charged with PME/PPPM), the two commands
(md through `vnetbench run`, LAMMPS through `vnetbench exec`), and reading their times.

LAMMPS is the production MD code Debian packages (`lmp`, pair style lj/cut); its input is
bench/in.lj with the box, cutoff, density, temperature and steps as variables, so both codes run the
same physics: fcc at 0.8442 and T 1.44 (seed 87287) unless told otherwise, skin 0.3, dt 0.005, NVE,
lists rebuilt every 20 steps without checks, thermo every 50. LAMMPS's "Loop time" and md's
``elapsed_s`` both time the step loop only.

Both run under the same MPI: the launcher and library LAMMPS is linked against (``same_mpi``), passed
to both commands as --mpi. Left to --mpi auto, md would take the mpirun on PATH, which may be another
Open MPI (the wheel's 5.0 when the venv is on PATH) than the 4.1 lmp loads, and the two overheads would
then measure two MPI libraries' TCP paths as well as the two codes.
"""

import json
import math
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

IN_LJ = """\
variable c index 40
variable rc index 2.5
variable n index 100
variable rho index 0.8442
variable t index 1.44
units lj
atom_style atomic
lattice fcc ${rho}
region box block 0 $c 0 $c 0 $c
create_box 1 box
create_atoms 1 box
mass 1 1.0
velocity all create ${t} 87287 loop geom
pair_style lj/cut ${rc}
pair_coeff 1 1 1.0 1.0 ${rc}
neighbor 0.3 bin
neigh_modify delay 0 every 20 check no
fix 1 all nve
thermo 50
run $n
"""

LOOP = re.compile(r"^Loop time of ([0-9.eE+-]+) on (\d+) procs for (\d+) steps with (\d+) atoms", re.M)
# a row of LAMMPS's "MPI task timing breakdown": section | min | avg | max | %varavg | %total ("Other" has no
# min or max and is left out)
SECTION = re.compile(r"^(\w+)\s*\|\s*([0-9.eE+-]+)\s*\|\s*([0-9.eE+-]+)\s*\|\s*([0-9.eE+-]+)\s*\|", re.M)


# scratch space beside the scripts (ignored by git), not /tmp: the emulation and fault tests of a
# concurrent checkout remove files that appear in /tmp while they run
BUILD = Path(__file__).resolve().parent / "build"


class BenchError(RuntimeError):
    pass


def scratch(prefix: str):
    """A temporary directory under ``BUILD``, removed when the ``with`` block ends."""
    import tempfile

    BUILD.mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryDirectory(prefix=prefix, dir=BUILD)


def vnetbench() -> str:
    return str(Path(sys.executable).with_name("vnetbench"))


def lammps() -> str:
    found = shutil.which("lmp")
    if not found:
        raise BenchError("no LAMMPS here: install Debian's lammps package (the lmp command)")
    return found


def same_mpi() -> str:
    """The launcher LAMMPS's MPI library comes with (what `vnetbench exec --mpi auto` picks for lmp), to
    give both codes as --mpi."""
    from vnetbench.mpi import selection as mpiselect
    from vnetbench.core.errors import UsageError

    try:
        launcher, _ = mpiselect.choose(None, lammps())
    except UsageError as exc:
        raise BenchError(f"no launcher for LAMMPS's MPI: {exc}") from None
    return launcher.path


def write_input(directory: Path) -> Path:
    path = directory / "in.lj"
    path.write_text(IN_LJ)
    return path


DEFAULT_DENSITY, DEFAULT_TEMPERATURE = 0.8442, 1.44  # in.lj's


def run_md(topology: str, ranks: int, cells: int, cutoff: float, steps: int, store: Path, timeout: float,
           mpi: str, density: float = DEFAULT_DENSITY, temperature: float = DEFAULT_TEMPERATURE,
           extra: tuple = ()) -> dict:
    """One `vnetbench run md` (with ``extra`` options): its record (status ok, or BenchError)."""
    argv = [vnetbench(), "run", "md", "--topology", topology, "--ranks", str(ranks), "--cells", str(cells),
            "--cutoff", str(cutoff), "--density", str(density), "--temperature", str(temperature),
            "--steps", str(steps), "--mpi", mpi, "--json", "--store", str(store), *extra]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or len(records) != 1 or records[0]["status"] != "ok":
        raise BenchError(f"md on {topology} at {ranks} ranks failed (exit {done.returncode}): "
                         f"{(records[0]['validation']['detail'] if records else done.stderr[-800:])}")
    return records[0]


def run_lammps(topology: str, ranks: int, cells: int, cutoff: float, steps: int, infile: Path,
               timeout: float, mpi: str, density: float = DEFAULT_DENSITY,
               temperature: float = DEFAULT_TEMPERATURE, extra: tuple = ()) -> dict:
    """One LAMMPS run through `vnetbench exec` (with ``extra`` options): loop seconds, atoms, steps, and the seconds
    of each section of its timing breakdown on the slowest rank."""
    argv = [vnetbench(), "exec", "--topology", topology, "--ranks", str(ranks), "--timeout", str(int(timeout)),
            "--mpi", mpi, *extra, "--", lammps(), "-in", str(infile), "-var", "c", str(cells), "-var", "rc", str(cutoff),
            "-var", "rho", str(density), "-var", "t", str(temperature), "-var", "n", str(steps), "-log", "none"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 30, cwd=infile.parent)
    found = LOOP.search(done.stdout)
    if done.returncode != 0 or not found:
        raise BenchError(f"LAMMPS on {topology} at {ranks} ranks failed (exit {done.returncode}): "
                         f"{(done.stderr or done.stdout)[-800:]}")
    loop, procs, nsteps, atoms = float(found[1]), int(found[2]), int(found[3]), int(found[4])
    if procs != ranks or nsteps != steps or atoms != 4 * cells ** 3:
        raise BenchError(f"LAMMPS ran {procs} procs, {nsteps} steps, {atoms} atoms; asked {ranks}, {steps}, "
                         f"{4 * cells ** 3}")
    return {"loop_s": loop, "atoms": atoms, "steps": nsteps, "sections_max_s": breakdown(done.stdout[found.end():])}


def breakdown(text: str) -> dict:
    """LAMMPS's "MPI task timing breakdown" in ``text`` (its output after the loop time): each section's seconds on
    its slowest rank, by lower-case name (comm: forward and reverse exchanges, migration and borders)."""
    return {name.lower(): float(most) for name, _, _, most in SECTION.findall(text)}


def retried(run, log, attempts: int = 5, pause: float = 30.0):
    """``run()``, again (up to ``attempts`` times in all, ``pause`` s apart) when it failed because
    something outside killed it: on a shared machine the clean-up of a concurrent test tier kills
    the MPI processes it did not see before it started (SIGKILL; SIGTERM seen 2026-11-28 too)."""
    for attempt in range(1, attempts + 1):
        try:
            return run()
        except BenchError as exc:
            if attempt == attempts or not any(sign in str(exc) for sign in ("-9", "SIGKILL", "SIGTERM")):
                raise
            log(f"killed from outside, running it again in {pause:g} s ({str(exc)[:200]})")
            time.sleep(pause)
    raise AssertionError("unreachable")


def loadavg() -> float:
    with open("/proc/loadavg") as handle:
        return float(handle.read().split()[0])


# md's charged lattice (+1 -1 -1 +1 on the fcc basis sites: LAMMPS's fcc basis is md's, so `create_atoms ... basis`
# gives the same arrangement) with lj/cut/coul/long and PPPM on md's grid, order and Ewald splitting (analytic
# differentiation by default, `diff ad`: one forward and one inverse FFT per evaluation, as smooth PME; -var diff ik
# for LAMMPS's own default, one forward and three inverse)
IN_PME = """\
variable c index 32
variable diff index ad
variable rc index 5.8
variable n index 20
variable rho index 0.8442
variable t index 1.44
units lj
atom_style charge
lattice fcc ${rho}
region box block 0 $c 0 $c 0 $c
create_box 2 box
create_atoms 1 box basis 1 1 basis 2 2 basis 3 2 basis 4 1
mass * 1.0
set type 1 charge 1.0
set type 2 charge -1.0
velocity all create ${t} 87287 loop geom
pair_style lj/cut/coul/long ${rc}
pair_coeff * * 1.0 1.0
kspace_style pppm 1e-5
kspace_modify mesh ${gx} ${gy} ${gz} order ${order} gewald ${g} diff ${diff}
neighbor 0.3 bin
neigh_modify delay 0 every 20 check no
fix 1 all nve
thermo_style custom step temp pe ecoul elong etotal
thermo 50
run $n
"""

# the thermo line of step 0 under IN_PME's thermo_style: temp, pe, ecoul, elong
PME_THERMO = re.compile(r"^\s*Step\s+Temp\s+PotEng\s+E_coul\s+E_long\s+TotEng\s*\n"
                        r"\s*0\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", re.M)


def pme_problem(cells: int, cutoff: float, steps: int, fft: str = "r2c") -> dict:
    """A charged problem with the grid and splitting md derives for it (its own functions), to hand to LAMMPS; ``fft``
    is md's --pme-fft (r2c: GROMACS's and NAMD's scheme; c2c: LAMMPS's)."""
    from vnetbench.kernels import _md_physics as physics

    params = {"cells": (cells,) * 3, "cutoff": cutoff, "system": "lj"}
    length = cells * physics.lattice_constant(DEFAULT_DENSITY)
    return {"cells": cells, "atoms": 4 * cells ** 3, "cutoff": cutoff, "steps": steps,
            "grid": list(physics.pme_grid([length] * 3, physics.pme_spacing(params))), "order": 4,
            "alpha": physics.ewald_alpha(cutoff, 1e-5), "fft": fft}


def pme_vars(p: dict, steps: int | None = None) -> list[str]:
    """LAMMPS's ``-var`` arguments for ``IN_PME`` on ``pme_problem`` ``p`` (md's grid, order and splitting;
    ``steps`` instead of the problem's)."""
    gx, gy, gz = p["grid"]
    values = {"c": p["cells"], "rc": p["cutoff"], "n": p["steps"] if steps is None else steps, "gx": gx, "gy": gy,
              "gz": gz, "order": p["order"], "g": repr(p["alpha"])}
    return [arg for name, value in values.items() for arg in ("-var", name, str(value))]


def run_md_pme(topology: str, ranks: int, p: dict, store: Path, mpi: str, timeout: float = 1800) -> dict:
    """One `vnetbench run md --electrostatics pme` of ``pme_problem`` ``p``: its speed, loop seconds, phases, step-0
    Coulomb energy per atom."""
    argv = [vnetbench(), "run", "md", "--topology", topology, "--ranks", str(ranks), "--cells", str(p["cells"]),
            "--cutoff", str(p["cutoff"]), "--steps", str(p["steps"]), "--electrostatics", "pme", "--pme-every", "1",
            "--pme-fft", p.get("fft", "r2c"), "--mpi", mpi, "--json", "--store", str(store)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or len(records) != 1 or records[0]["status"] != "ok":
        raise BenchError(f"md on {topology} at {ranks} ranks failed (exit {done.returncode}): "
                         f"{(records[0]['validation']['detail'] if records else done.stderr[-800:])}")
    m = records[0]["metrics"]
    if m["pme_grid"] != p["grid"] or not math.isclose(m["ewald_alpha"], p["alpha"], rel_tol=1e-12):
        raise BenchError(f"md used grid {m['pme_grid']} and beta {m['ewald_alpha']}, not {p['grid']}, {p['alpha']}")
    pme = sum(m[k] for k in ("pme_spread_s", "pme_fft_s", "pme_solve_s", "pme_gather_s"))
    return {"rate": m["atom_steps_per_s"], "loop_s": m["elapsed_s"], "coul0": m["thermo"][0]["coul"], "long_s": pme,
            "pair_s": m["force_s"], "metrics": m}


def run_lammps_pme(topology: str, ranks: int, p: dict, infile: Path, mpi: str, timeout: float = 1800) -> dict:
    """One LAMMPS run of ``IN_PME`` through `vnetbench exec`: as ``run_md_pme``, and its timing breakdown."""
    argv = [vnetbench(), "exec", "--topology", topology, "--ranks", str(ranks), "--timeout", str(int(timeout)),
            "--mpi", mpi, "--", lammps(), "-in", str(infile), *pme_vars(p), "-log", "none"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 30, cwd=infile.parent)
    found, thermo = LOOP.search(done.stdout), PME_THERMO.search(done.stdout)
    if done.returncode != 0 or not found or not thermo:
        raise BenchError(f"LAMMPS on {topology} at {ranks} ranks failed (exit {done.returncode}): "
                         f"{(done.stderr or done.stdout)[-800:]}")
    loop, procs, nsteps, atoms = float(found[1]), int(found[2]), int(found[3]), int(found[4])
    if procs != ranks or nsteps != p["steps"] or atoms != p["atoms"]:
        raise BenchError(f"LAMMPS ran {procs} procs, {nsteps} steps, {atoms} atoms; asked {ranks}, {p['steps']}, "
                         f"{p['atoms']}")
    sections = breakdown(done.stdout[found.end():])
    return {"rate": atoms * nsteps / loop, "loop_s": loop, "coul0": float(thermo[3]) + float(thermo[4]),
            "long_s": sections.get("kspace"), "pair_s": sections.get("pair"), "sections_max_s": sections}


# ---- the speed benchmarks (md_speed.py, md_pme_speed.py): one command line, one alternating loop ------------------

def speed_args(argv, prog: str, description: str, *, cells: int, cutoff: float, steps: int, repeat: int,
               cells_help: str, cutoff_help: str):
    """A speed benchmark's options: --cells, --cutoff, --steps, --ranks, --repeat, --json, with its defaults."""
    import argparse

    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--cells", type=int, default=cells, help=f"fcc cells per side (default {cells}: {cells_help})")
    parser.add_argument("--cutoff", type=float, default=cutoff, help=f"cutoff, sigma (default {cutoff}{cutoff_help})")
    parser.add_argument("--steps", type=int, default=steps, help=f"time steps (default {steps})")
    parser.add_argument("--ranks", default="1,2", help="rank counts, comma-separated (default 1,2)")
    parser.add_argument("--repeat", type=int, default=repeat, help=f"repetitions of each pair (default {repeat})")
    parser.add_argument("--json", action="store_true", help="print one JSON document with every sample")
    args = parser.parse_args(argv)
    try:
        args.ranks = [int(n) for n in args.ranks.split(",")]
    except ValueError:
        parser.error(f"--ranks: {args.ranks!r} is not allowed; use whole numbers separated by commas")
    for option, value in (("--cells", args.cells), ("--steps", args.steps), ("--repeat", args.repeat),
                          ("--ranks", min(args.ranks))):
        if value < 1:
            parser.error(f"{option}: {value} is not allowed; use a whole number >= 1")
    if args.cutoff <= 0:
        parser.error(f"--cutoff: {args.cutoff} is not allowed; use a number above 0")
    return args


def alternated(args, run_side, log) -> dict:
    """{ranks: {"md": [sample, ...], "lammps": [...]}}: each repetition runs both codes at each rank count, md first
    in even repetitions and LAMMPS first in odd ones (so that drift lands on both); ``run_side(side, ranks)`` is one
    sample (a dict with "rate", atom-steps per second), taken with its load average before it."""
    samples = {n: {"md": [], "lammps": []} for n in args.ranks}
    for rep in range(args.repeat):
        for ranks in args.ranks:
            for side in (("md", "lammps") if rep % 2 == 0 else ("lammps", "md")):
                load = loadavg()
                sample = {**retried(lambda: run_side(side, ranks), log), "loadavg_before": load}
                samples[ranks][side].append(sample)
                log(f"rep {rep + 1}, {ranks} rank(s), {side}: {sample['rate'] / 1e6:.3f} M atom-steps/s"
                    f"{sample.get('detail', '')} (load {load:.2f})")
    return samples
