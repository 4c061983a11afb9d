"""The world-size guard of application runs: which world each MPI process of the program joined.

A launcher of one MPI starting a program of another starts N singletons, each "rank 0 of 1", and
the job exits 0; only the ranks can tell. ``worldsize.c`` (an LD_PRELOAD shim, built here with ``cc``
on first use and cached by the hash of its source) notes, in each process that calls MPI_Init, the
size of its MPI_COMM_WORLD, its rank and MPI_Get_library_version, one JSON file per process; the
wrapper preloads it; ``judge`` reads the files after the job.
"""

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path

from vnetbench.core.shims import compile_cached
from vnetbench.core.files import read_json_files

SOURCE = Path(__file__).with_name("worldsize.c")
DIR_ENV = "VNETBENCH_WORLD_DIR"  # where the shim writes; the wrapper sets it for the program
FOLDER = "world"  # in the job's directory
MAX_FILE = 64 << 10  # a file holds one library version (at most 8 KiB, escaped) and a few numbers
MAX_FILES = 4096


@dataclass
class Guard:
    """The built shim (``path``), or why there is none (``reason``)."""

    path: str | None
    reason: str | None = None

    def describe(self) -> dict:
        return {"available": self.path is not None, **({"reason": self.reason} if self.reason else {})}


@functools.lru_cache(maxsize=None)
def build_guard(cc: str = "cc", cache: Path | None = None) -> Guard:
    """The shim, compiled on first use into the per-user cache; without a C compiler, a Guard saying why there
    is none. Asked once per process: every repetition of a sweep asks, and a compile that failed (up to
    shims.COMPILE_TIMEOUT) is not tried again for each."""
    return Guard(*compile_cached(SOURCE, "worldsize", "the world-size guard", cc=cc, cache=cache))


def read_worlds(job_dir) -> list[dict]:
    """What the program's processes wrote, one dict each (unreadable files left out)."""
    folder = Path(job_dir) / FOLDER
    try:
        names = sorted(name for name in os.listdir(folder) if name.endswith(".json"))[:MAX_FILES]
    except OSError:
        return []
    return read_json_files(folder, names, MAX_FILE, "world")


@dataclass
class Verdict:
    """The guard's finding: ``problem`` fails the run; ``record`` goes into it; ``library`` is the MPI
    library version the ranks loaded (None when not observed)."""

    record: dict
    problem: str | None = None
    library: str | None = None
    notes: list[str] = field(default_factory=list)


def judge(guard: Guard, seen: list[dict], ranks: int, launcher) -> Verdict:
    """The guard's verdict on a job of ``ranks`` ranks started by ``launcher``, from what ``read`` found."""
    if guard.path is None:
        return Verdict({**guard.describe(), "observed": False}, notes=[f"world size not observed: {guard.reason}"])
    if not seen:
        why = ("no process of the program called MPI_Init with the guard loaded: not an MPI program, an MPI "
               "linked statically, or ranks on hosts that do not share this host's files")
        return Verdict({**guard.describe(), "observed": False, "reason": why},
                       notes=["world size not observed (no process called MPI_Init)"])
    # processes started by MPI_Comm_spawn join a world of their own: only the launched ones count; an MPI
    # whose ABI the shim does not know leaves its world unasked (-1)
    launched = [s for s in seen if not s.get("spawned") and s["world"] >= 1]
    if not launched:
        why = f"the program's MPI is of an ABI the guard does not know ({_short(seen[0].get('library') or '')})"
        return Verdict({**guard.describe(), "observed": False, "reason": why},
                       library=seen[0].get("library") or None, notes=[f"world size not observed: {why}"])
    worlds = sorted({s["world"] for s in launched})
    libraries = sorted({s.get("library") or "" for s in launched} - {""})
    record = {**guard.describe(), "observed": True, "processes": len(launched), "worlds": worlds,
              "ranks_seen": sorted({s.get("rank") for s in launched if isinstance(s.get("rank"), int)}),
              "spawned": len(seen) - len(launched)}
    library = next((s.get("library") for s in sorted(launched, key=lambda s: s.get("rank", 0)) if s.get("library")),
                   None)
    if len(libraries) > 1:
        record["libraries"] = libraries
    # N singletons never include a world of N; a helper process that starts MPI alone beside the job's
    # ranks (a pre- or post-step of a script, a spawned worker importing mpi4py) is noted, not failed
    wrong = [world for world in worlds if world != ranks]
    if ranks in worlds:
        notes = [f"processes outside the job's world of {ranks} also started MPI (worlds {wrong})"] if wrong else []
        return Verdict(record, library=library, notes=notes)
    sizes = " and ".join(map(str, wrong))
    problem = (f"the program's ranks saw a world of {sizes}, not {ranks}: were they started by a launcher of "
               f"another MPI? (launcher: {launcher}")
    problem += f"; ranks loaded {_short(library)})" if library else ")"
    return Verdict(record, problem=problem, library=library)


def _short(library: str) -> str:
    from ..core.environment import mpi_name

    return mpi_name(library) or "an unnamed MPI library"
