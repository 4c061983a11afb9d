"""What md_speed.py and md_fidelity.py share: the LAMMPS input for md's problem, the two commands
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
           mpi: str, density: float = DEFAULT_DENSITY, temperature: float = DEFAULT_TEMPERATURE) -> dict:
    """One `vnetbench run md`: its record (status ok, or BenchError)."""
    argv = [vnetbench(), "run", "md", "--topology", topology, "--ranks", str(ranks), "--cells", str(cells),
            "--cutoff", str(cutoff), "--density", str(density), "--temperature", str(temperature),
            "--steps", str(steps), "--mpi", mpi, "--json", "--store", str(store)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or len(records) != 1 or records[0]["status"] != "ok":
        raise BenchError(f"md on {topology} at {ranks} ranks failed (exit {done.returncode}): "
                         f"{(records[0]['validation']['detail'] if records else done.stderr[-800:])}")
    return records[0]


def run_lammps(topology: str, ranks: int, cells: int, cutoff: float, steps: int, infile: Path,
               timeout: float, mpi: str, density: float = DEFAULT_DENSITY,
               temperature: float = DEFAULT_TEMPERATURE) -> dict:
    """One LAMMPS run through `vnetbench exec`: loop seconds, atoms, steps, and the seconds of each section of its
    timing breakdown on the slowest rank."""
    argv = [vnetbench(), "exec", "--topology", topology, "--ranks", str(ranks), "--timeout", str(int(timeout)),
            "--mpi", mpi, "--", lammps(), "-in", str(infile), "-var", "c", str(cells), "-var", "rc", str(cutoff),
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
    the MPI processes it did not see before it started."""
    for attempt in range(1, attempts + 1):
        try:
            return run()
        except BenchError as exc:
            if attempt == attempts or not any(sign in str(exc) for sign in ("-9", "SIGKILL")):
                raise
            log(f"killed from outside, running it again in {pause:g} s ({str(exc)[:200]})")
            time.sleep(pause)
    raise AssertionError("unreachable")


def loadavg() -> float:
    with open("/proc/loadavg") as handle:
        return float(handle.read().split()[0])
