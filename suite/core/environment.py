"""What a record says about the machine and software a run used (collected on rank 0)."""

import functools
import os
import subprocess
import sys
import time
from pathlib import Path


@functools.cache
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "unknown"


SOURCE = Path(__file__).resolve().parent.parent  # the checkout (or installed tree) vnetbench runs from
GIT_FACTS = {"git_revision": (str, type(None)), "git_dirty": (bool, type(None))}


UNKNOWN_SOURCE = {"git_revision": None, "git_dirty": None}
# how old a ``git status`` begun by ``ask_source`` may be when ``source`` reads it; an older one is asked again
ASKED_FRESH_S = 2.0
_asked: tuple[float, subprocess.Popen] | None = None  # (when, the git status) begun by ask_source


def _git_status() -> subprocess.Popen | None:
    if not (SOURCE / ".git").exists():
        return None
    try:
        # --no-optional-locks: a status refreshes the index where it can (taking .git/index.lock); a run must not
        # write into the checkout vnetbench runs from (a commit there meanwhile would meet "index.lock exists")
        return subprocess.Popen(["git", "--no-optional-locks", "-C", str(SOURCE), "status", "--porcelain=v2",
                                 "--branch", "--untracked-files=no"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
    except OSError:
        return None


def _read_status(git: subprocess.Popen | None) -> dict:
    if git is None:
        return dict(UNKNOWN_SOURCE)
    try:
        out, _ = git.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        git.kill()
        git.communicate()
        return dict(UNKNOWN_SOURCE)
    lines = out.splitlines()
    revision = next((line.split()[2] for line in lines if line.startswith("# branch.oid ")), None)
    if git.returncode != 0 or revision is None or revision == "(initial)":
        return dict(UNKNOWN_SOURCE)
    return {"git_revision": revision, "git_dirty": any(not line.startswith("#") for line in lines)}


def ask_source() -> None:
    """Begin the ``git status`` the next ``source()`` reads, so that git runs beside the launcher's own start
    (a run's start would otherwise wait on it); ``drop_asked`` ends one that no run read."""
    global _asked
    drop_asked()
    _asked = (time.monotonic(), _git_status())


def drop_asked() -> None:
    """Wait for the ``git status`` ``ask_source`` began, if no ``source()`` read it, and forget it."""
    global _asked
    asked, _asked = _asked, None
    if asked is not None:
        _read_status(asked[1])


def source() -> dict:
    """The git facts of the vnetbench source as it is now: revision (None outside a checkout, or before its first
    commit) and whether tracked files changed (None without a revision). Asked afresh at every call (or read from
    ``ask_source``'s, begun less than ASKED_FRESH_S before): a launcher that lives through a sweep hands each
    run's ranks what they will import then, an edit or a commit in between included. One ``git status`` says
    both (its v2 header carries the commit)."""
    global _asked
    asked, _asked = _asked, None
    if asked is not None:
        when, git = asked
        if time.monotonic() - when <= ASKED_FRESH_S:
            return _read_status(git)
        _read_status(git)  # waited for, not used
    return _read_status(_git_status())


def source_problem(facts) -> str | None:
    """Why ``facts`` (a launcher's ``source()`` handed to the ranks) is not one, or None."""
    if not isinstance(facts, dict) or set(facts) != set(GIT_FACTS) \
            or not all(isinstance(facts[key], kinds) for key, kinds in GIT_FACTS.items()):
        return "expected {git_revision: string or null, git_dirty: boolean or null}"
    return None


@functools.cache
def _own_source() -> dict:
    return source()  # a rank makes one record: asked once


def _sysfs(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def cpu_state(root: str = "/sys/devices/system/cpu") -> dict:
    """Frequency governor, turbo/boost and SMT as pyperf records them; None where this machine
    (often a VM) does not expose the setting.

    governor: the distinct scaling governors of the online cpus; boost: True when turbo/boost is
    on (acpi-cpufreq/amd's cpufreq/boost, or intel_pstate's no_turbo inverted); smt: the kernel's
    SMT control ("on", "off", "notsupported", ...) and whether siblings are active.
    """
    governors = sorted({value for cpu in sorted(Path(root).glob("cpu[0-9]*"))
                        if (value := _sysfs(f"{cpu}/cpufreq/scaling_governor"))})
    boost = _sysfs(f"{root}/cpufreq/boost")
    no_turbo = _sysfs(f"{root}/intel_pstate/no_turbo")
    if boost is not None:
        boost = boost == "1"
    elif no_turbo is not None:
        boost = no_turbo == "0"
    active = _sysfs(f"{root}/smt/active")
    return {"governor": governors or None, "boost": boost,
            "smt": {"control": _sysfs(f"{root}/smt/control"), "active": None if active is None else active == "1"}}


def _version(distribution: str) -> str | None:
    # the installed version without importing the package (numba takes a second to import; numpy a tenth,
    # several seconds in an emulated guest)
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


# set by the runtime for every process, not chosen by anyone
_RUNTIME_MCA = {"OMPI_MCA_PREFIXES", "OMPI_MCA_cpu_type", "OMPI_MCA_initial_wdir", "OMPI_MCA_num_procs",
                "OMPI_MCA_orte_local_daemon_uri", "OMPI_MCA_orte_hnp_uri", "PMIX_MCA_mca_base_component_show_load_errors"}


def mca_settings(environ=None) -> dict:
    """The Open MPI / PRRTE / PMIx MCA parameters set in the environment (not the runtime's own)."""
    environ = os.environ if environ is None else environ
    prefixes = ("OMPI_MCA_", "PRTE_MCA_", "PMIX_MCA_")
    return {key: value for key, value in sorted(environ.items())
            if key.startswith(prefixes) and key not in _RUNTIME_MCA}


def mpi_name(library_version: str) -> str | None:
    """MPI_Get_library_version's text as a short name: "Open MPI v5.0.11, package: ..." -> "Open MPI 5.0.11",
    "MPICH Version:\t4.0.2\nMPICH Release ..." -> "MPICH 4.0.2"; None for no text."""
    text = (library_version or "").strip("\x00 \n")
    if not text:
        return None
    head = text.splitlines()[0].split(",")[0]
    if "Open MPI" in head:
        return f"Open MPI {head.rsplit('v', 1)[-1].strip()}"
    return " ".join(head.replace("Version:", "").split()) or None


def collect(hostnames, mpi_library_version: str | None = None, load_at_start=None, source_facts=None) -> dict:
    """The environment record; ``load_at_start``: os.getloadavg() taken before the kernel ran; ``source_facts``:
    ``source()`` as the launcher found it where the ranks run from its files (checked by the ranks' parser),
    else None and they are looked up here."""
    import platform  # here, not at the top: every rank imports this module, only rank 0 collects

    import vnetbench

    try:
        import mpi4py

        mpi4py_version = mpi4py.__version__
    except ImportError:
        mpi4py_version = None
    mpi = mpi_name(mpi_library_version) if mpi_library_version else None
    open_mpi = mpi.removeprefix("Open MPI ") if mpi and mpi.startswith("Open MPI ") else None
    if mpi_library_version:
        mpi_library_version = mpi_library_version.strip("\x00 \n")
    return {
        "hostnames": sorted(set(hostnames)),
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "platform": platform.platform(),
        "versions": {
            "vnetbench": vnetbench.__version__,
            "open_mpi": open_mpi,
            "mpi": mpi,
            "mpi4py": mpi4py_version,
            "numpy": _version("numpy"),  # an application's launcher never imports numpy otherwise
            "numba": _version("numba"),
            "python": platform.python_version(),
        },
        "mpi_library": mpi_library_version,
        **(source_facts if source_facts is not None else _own_source()),
        "cpu": cpu_state(),
        "load_average": [round(x, 2) for x in (load_at_start or os.getloadavg())],
        "mca": mca_settings(),
    }
