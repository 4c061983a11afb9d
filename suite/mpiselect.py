"""``--mpi auto|openmpi|mpich|PATH``: which launcher starts a job, and the refusal of one that cannot.

``auto`` takes, for kernels, the MPI that mpi4py loads, and for a program, the MPI it is linked
against (``linkage``); then the launcher beside that library's installation, or on PATH. A launcher
whose ABI family differs from what the ranks will load is refused before anything starts: an MPICH
program under Open MPI's mpirun runs as N singletons, each "rank 0 of 1".
"""

import functools
import os
import shutil
import sys

from . import flavours, linkage
from .errors import UsageError

ENV = "VNETBENCH_MPI"
CHOICES = ("auto", "openmpi", "mpich")
# launcher names to try, per family, in order (Debian's /usr/bin/mpirun may be any MPI: it is only
# taken once its --version says which)
NAMES = {
    "openmpi": ("mpirun.openmpi", "mpirun", "mpiexec.openmpi", "prterun", "orterun", "mpiexec"),
    "mpich": ("mpiexec.hydra", "mpiexec.mpich", "mpirun.mpich", "mpiexec", "mpirun"),
}


def add_option(parser) -> None:
    parser.add_argument("--mpi", metavar="auto|openmpi|mpich|PATH",
                        help=f"the MPI that launches the ranks: auto (the one the program or mpi4py is linked "
                             f"against), openmpi, mpich, or a path to mpirun/mpiexec (default: ${ENV}, else auto)")


def requested(choice: str | None) -> str:
    source = "--mpi" if choice else ENV
    choice = choice or os.environ.get(ENV) or "auto"
    if choice not in CHOICES and "/" not in choice:
        raise UsageError(f"{source}: {choice!r} is not allowed; choose auto, openmpi, mpich or a path to "
                         f"mpirun/mpiexec")
    return choice


def _beside(library: str | None) -> list[str]:
    """bin/ folders of the installation ``library`` belongs to (prefix/lib[/multiarch]/libmpi.so)."""
    if not library:
        return []
    folder = os.path.dirname(os.path.realpath(library))
    found = []
    for _ in range(3):
        folder = os.path.dirname(folder)
        found.append(os.path.join(folder, "bin"))
    return found


def find(family: str, library: str | None = None) -> flavours.Launcher:
    """A launcher of ``family``: first beside ``library``, then beside vnetbench's Python, then on PATH."""
    folders = [*_beside(library), os.path.dirname(sys.executable)]
    seen = set()
    for folder in folders + [None]:
        for name in NAMES[family]:
            path = os.path.join(folder, name) if folder else shutil.which(name)
            if not path or not os.access(path, os.X_OK) or os.path.realpath(path) in seen:
                continue
            seen.add(os.path.realpath(path))
            try:
                launcher = flavours.detect(path)
            except UsageError:
                continue
            if launcher.family == family:
                return launcher
    raise UsageError(f"--mpi: no {flavours.FAMILY_NAMES[family]} launcher found (tried {', '.join(NAMES[family])} "
                     f"beside the MPI library, beside {sys.executable} and on PATH); give its path with --mpi PATH")


@functools.cache
def mpi4py_linkage() -> linkage.Linkage | None:
    """The MPI library mpi4py loads in this Python (asked of mpi4py itself, without MPI_Init)."""
    try:
        import mpi4py

        mpi4py.rc.initialize = False
        mpi4py.rc.finalize = False
        from mpi4py import MPI  # noqa: F401 - loads libmpi
    except (ImportError, RuntimeError, OSError):
        return None
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            soname = os.path.basename(path)
            for known, family in linkage.MPI_SONAMES.items():
                if soname.startswith(known):
                    return linkage.Linkage(family, known, path, "mpi4py")
    return None


def _our_python(path: str) -> bool:
    """``path`` is this environment's Python, or a script whose #! line runs it."""
    ours = os.path.dirname(os.path.abspath(sys.executable))
    if os.path.basename(path).startswith("python"):
        return os.path.dirname(os.path.abspath(path)) == ours
    try:
        with open(path, "rb") as handle:
            first = handle.readline(300)
    except OSError:
        return False
    interpreter = first[2:].split()[0].decode(errors="replace") if first.startswith(b"#!") and first[2:].split() else ""
    return os.path.basename(interpreter).startswith("python") and os.path.dirname(interpreter) == ours


def choose(choice: str | None, program: str | None = None) -> tuple[flavours.Launcher, linkage.Linkage | None]:
    """(the launcher, the MPI the ranks will load) for ``program`` (a path or name; None: the kernels,
    through mpi4py); UsageError for a launcher of another family than that MPI."""
    choice = requested(choice)
    if program is None:
        needs, what = mpi4py_linkage(), f"mpi4py ({sys.executable})"
    else:
        path = linkage.which_program(program)
        needs, what = (linkage.mpi_linkage(path) if path else None), program
        if needs is None and path and _our_python(path):
            # a program run by this venv's Python: its MPI is mpi4py's (python itself links no MPI)
            needs = mpi4py_linkage()
    if choice == "auto":
        launcher = find(needs.family, needs.path) if needs else find("openmpi")
    elif choice in flavours.FAMILY_NAMES:
        launcher = find(choice)
    else:
        launcher = flavours.detect(choice)
    if needs and needs.family != launcher.family:
        other = "openmpi" if needs.family == "openmpi" else "mpich"
        raise UsageError(f"{what} is {'built' if program is None else 'linked'} against {needs.describe()} but "
                         f"--mpi is {launcher}; use --mpi {other} or --mpi auto")
    return launcher, needs
