"""Which MPI a program is linked against: its ELF needed libraries, followed through its shared libraries.

Debian's ``lmp`` needs libmpi.so.40 itself and again through liblammps.so.0; an MPICH-built
program needs libmpich.so.12 (or libmpi.so.12, the name the MPICH ABI family shares with Intel
MPI, MVAPICH and Cray MPICH). Libraries are found the way the dynamic loader finds them
(DT_RPATH, LD_LIBRARY_PATH, DT_RUNPATH, /etc/ld.so.conf, the default directories), without
running ``ldd``, which would execute the program's own loader.
"""

import glob
import os
from collections import deque, namedtuple

from . import FAMILIES

# the MPI library's soname -> its ABI family
MPI_SONAMES = {
    "libmpi.so.40": "openmpi",
    "libmpich.so.12": "mpich",
    "libmpi.so.12": "mpich",
}
DEFAULT_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib")
MAX_LIBRARIES = 400  # a program with more is read no further (ours need a dozen)


class Linkage(namedtuple("Linkage", "family soname path via", defaults=(None,))):
    """The MPI library a program needs: its ABI ``family``, ``soname``, where it was found
    (``path``, None when the loader would not find it) and the library that needs it (``via``).
    A named tuple, not a dataclass (``vnetbench.cli`` says why)."""

    __slots__ = ()

    def describe(self) -> str:
        """'the MPICH ABI (libmpich.so.12)'."""
        return f"the {FAMILIES[self.family].abi} ({self.soname})"


def is_elf(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == b"\x7fELF"
    except OSError:
        return False


def _dynamic(path: str) -> tuple[list[str], list[str], list[str]]:
    """(needed, rpath, runpath) of one ELF file; empty lists for a file that is not a dynamic ELF."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    needed, rpath, runpath = [], [], []
    try:
        with open(path, "rb") as handle:
            elf = ELFFile(handle)
            for section in elf.iter_sections():
                if not isinstance(section, DynamicSection):
                    continue
                for tag in section.iter_tags():
                    if tag.entry.d_tag == "DT_NEEDED":
                        needed.append(tag.needed)
                    elif tag.entry.d_tag == "DT_RPATH":
                        rpath += tag.rpath.split(":")
                    elif tag.entry.d_tag == "DT_RUNPATH":
                        runpath += tag.runpath.split(":")
    except (OSError, ELFError, ValueError):
        return [], [], []
    origin = os.path.dirname(os.path.realpath(path))
    expand = lambda dirs: [d.replace("$ORIGIN", origin).replace("${ORIGIN}", origin) for d in dirs if d]
    return needed, expand(rpath), expand(runpath)


def _conf_dirs(conf: str = "/etc/ld.so.conf", depth: int = 0) -> list[str]:
    dirs = []
    try:
        lines = open(conf, encoding="utf-8", errors="replace").read().splitlines()
    except OSError:
        return dirs
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line.startswith("include ") and depth < 4:
            for included in sorted(glob.glob(line.split(None, 1)[1])):
                dirs += _conf_dirs(included, depth + 1)
        elif line.startswith("/"):
            dirs.append(line)
    return dirs


def _find(name: str, rpath: list[str], runpath: list[str], environ) -> str | None:
    if "/" in name:
        return name if os.path.exists(name) else None
    search = [] if runpath else list(rpath)
    search += [d for d in environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    search += runpath + _conf_dirs() + list(DEFAULT_DIRS)
    for folder in search:
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate):
            return candidate
    return None


def mpi_linkage(program: str, environ=None) -> Linkage | None:
    """The MPI library ``program`` (a path to an ELF file) needs, directly or through its libraries;
    None when it needs none (or is no ELF file: a script, for instance)."""
    environ = os.environ if environ is None else environ
    if not is_elf(program):
        return None
    queue = deque([(program, None, [])])  # (path, who needs it, rpath inherited from it)
    seen = set()
    while queue and len(seen) < MAX_LIBRARIES:
        path, via, inherited = queue.popleft()
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        needed, rpath, runpath = _dynamic(path)
        # DT_RPATH of the program applies to its libraries' lookups too (DT_RUNPATH does not)
        rpath = rpath + inherited
        for name in needed:
            found = _find(name, rpath, runpath, environ)
            if name in MPI_SONAMES:
                here = None if path == program else os.path.basename(path)
                return Linkage(MPI_SONAMES[name], name, found, here)
            if found:
                queue.append((found, path, rpath))
    return None


def which_program(program: str, environ=None) -> str | None:
    """The file ``program`` names, as execvp would find it (a path, or a name on PATH)."""
    environ = os.environ if environ is None else environ
    if "/" in program:
        return program if os.path.isfile(program) else None
    for folder in environ.get("PATH", os.defpath).split(":"):
        candidate = os.path.join(folder or ".", program)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None
