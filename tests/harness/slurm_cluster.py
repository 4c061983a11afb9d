"""A real Slurm cluster for tests: munge, slurmctld and one slurmd per network namespace, on two leaf switches.

    with SlurmCluster() as cluster:
        subprocess.run(["sinfo"], env=cluster.env(), check=True)

Layout (``TAG`` is random, so two test sessions never clash):

    slurmctld (host network, own UTS namespace, hostname vnbs-TAG-ctl, address .1 on the spine bridge)
      spine bridge vnbsTAGp
        leaf switch vnbsTAGs0 --- uplink vnbsTAGu0a/vnbsTAGu0b (unlimited)  --- nodes n0, n1
        leaf switch vnbsTAGs1 --- uplink vnbsTAGu1a/vnbsTAGu1b (tc tbf 1 Gbit/s, like the netns presets) --- n2, n3

Every node is a network namespace ``vnbs-TAG-nK`` with its own address and (UTS namespace) hostname
``vnbs-TAG-nK``; its slurmd is started with ``nsenter --net`` (``ip netns exec`` remounts /sys and hides
/sys/fs/cgroup from slurmd). topology.conf names the two leaf switches, so ``sbatch --switches=1`` and
``scontrol show topology`` mean what they mean on a cluster. Each slurmd also has a mount namespace in which
its own directory is bound over ``node_tmp`` (mpi.conf's PMIxCliTmpDirBase), as each node of a cluster has
its own /tmp: ``srun --mpi=pmix`` makes a directory there named by job and step, which nodes sharing one
would collide on; everything else (the venv, the tests' files) is shared, like a cluster's shared filesystem. munge runs with its own key and socket, Slurm
with its own config (``SLURM_CONF``), ports, state and spool directories, all in one private temp dir:
no system service is touched. The prefix ``vnbs`` is neither the netns backend's ``vnb<hex>``/``vnb-<hex>-``
nor the SSH hosts' ``vnbt``, so no cleanup mistakes these objects for theirs.

Leaving the context, or a failure while starting, kills every process started here and every process
in the namespaces, deletes namespaces and links, and removes the directory.
"""

import ipaddress
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from vnetbench.core.procs import kill

from .lifecycle import Lifecycle, links as _links, netns_pids as _netns_pids, run as _run

PREFIX = "vnbs"
# the netns backend uses 10.213.0.0/16, the SSH hosts 10.214.0.0/16
POOL = ipaddress.IPv4Network("10.215.0.0/16")
TOOLS = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "scontrol", "sinfo", "squeue", "sacct", "scancel",
         "nsenter", "unshare", "ip", "tc")
START_TIMEOUT = 30.0
UPLINK_RATE = "1gbit"  # the slow leaf's uplink, as the netns presets' physical links
# not /tmp or /var/tmp: other sessions on a shared machine sweep those of what they did not make, and
# a cluster whose config and spool vanish stops answering (slurmd exits); removed again when empty
STATE_ROOT = Path(os.environ.get("VNB_SLURM_STATE_ROOT", "/var/lib/vnetbench-test"))


def missing_requirements() -> str | None:
    """Why a Slurm cluster cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, bridges, Slurm daemons)"
    for tool in TOOLS:
        if not shutil.which(tool):
            return (f"{tool} is missing (Debian: apt-get install slurm-wlm munge; "
                    "scripts/test installs them)")
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


@dataclass
class Node:
    name: str  # also its hostname and Slurm NodeName
    switch: str
    netns: str
    veth: str
    address: str
    proc: subprocess.Popen | None = None


class SlurmCluster(Lifecycle):
    """A Slurm cluster of ``per_switch`` nodes on each of ``switches`` leaf switches, partition ``partition``."""

    PREFIX, POOL, WHAT = PREFIX, POOL, "Slurm cluster"
    missing_requirements = staticmethod(missing_requirements)

    def __init__(self, switches: int = 2, per_switch: int = 2, partition: str = "vnb", cpus: int = 2):
        super().__init__()
        self.switches, self.per_switch, self.partition, self.cpus = switches, per_switch, partition, cpus
        self.dir: Path | None = None
        self.nodes: list[Node] = []
        self.gateway = ""
        self.ctl_host = ""
        self.procs: list[subprocess.Popen] = []
        self._netns: list[str] = []
        self._links: list[str] = []

    # ---- as tests use it --------------------------------------------------------------------

    @property
    def conf(self) -> Path:
        return self.dir / "etc" / "slurm.conf"

    @property
    def node_tmp(self) -> Path:
        """The path where each node sees its own temp dir (bound there in the node's mount namespace)."""
        return self.dir / "nodetmp"

    @property
    def leaf_switches(self) -> list[str]:
        return [f"{PREFIX}{self.tag}s{k}" for k in range(self.switches)]

    @property
    def version(self) -> str:
        """The installed Slurm's version as its commands print it (Debian's: ``slurm-wlm 22.05.8``)."""
        return self.slurm("sinfo", "--version").stdout.strip()

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def env(self, base: dict | None = None) -> dict:
        """An environment whose Slurm commands talk to this cluster."""
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = str(self.conf)
        # the nodes share this machine's cores, so Slurm's CPUs outnumber them and busy-polling ranks starve each
        # other: Open MPI's ranks yield when idle, as vnetbench's own launcher has them do on an oversubscribed host.
        # Withdrawn once (166dad9): yielding, Open MPI 5.0.11's ranks under srun segfaulted in MPI_Init in 2 of 25
        # and 1 of 30 runs on a loaded machine. The cause was Slurm's tree fence, no barrier on 2 nodes (a rank out
        # of MPI_Init sent to one whose MPI_COMM_WORLD was not yet in the PML), since worked around by vnetbench
        # (topologies/slurm/allocation.py, PMIX_FENCE). With it, benchmarks/slurm_yield.py --runs 50 (3 ranks of a
        # small allreduce under srun beside two busy loops): 50 of 50 ok yielding, 1.13 s a run against 1.53 s
        env["OMPI_MCA_mpi_yield_when_idle"] = "1"
        for key in [k for k in env if k.startswith("SLURM_") and k != "SLURM_CONF"]:
            del env[key]  # an outer allocation must not leak into this cluster's commands
        return env

    def slurm(self, *argv: str, timeout: float = 20, check: bool = True) -> subprocess.CompletedProcess:
        return _run(list(argv), timeout=timeout, check=check, env=self.env())

    def kill_node(self, name: str) -> None:
        """Stop node ``name`` hard: its slurmd and everything running in its namespace (a node failure)."""
        node = self.node(name)
        kill(_netns_pids(node.netns), grace=0.0)
        if node.proc is not None:
            try:
                node.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    def restart_node(self, name: str) -> None:
        """Start node ``name``'s slurmd again and return it to service."""
        node = self.node(name)
        self._start_slurmd(node)
        self.slurm("scontrol", "update", f"NodeName={name}", "State=RESUME", check=False)
        self.wait_idle([name])

    def wait_idle(self, names: list[str] | None = None, timeout: float = START_TIMEOUT) -> None:
        names = names or [n.name for n in self.nodes]
        deadline = time.monotonic() + timeout
        states = {}
        while time.monotonic() < deadline:
            out = self.slurm("sinfo", "-N", "-h", "-o", "%N %T", check=False).stdout
            states = dict(line.split()[:2] for line in out.splitlines() if len(line.split()) >= 2)
            if all(states.get(n, "").rstrip("*").startswith("idle") for n in names):
                return
            time.sleep(0.3)
        raise RuntimeError(f"Slurm nodes not idle after {timeout:g} s: {states}\n{self.log_tail()}")

    def settle(self, timeout: float = 60.0) -> None:
        """Wait until no job is queued, running or completing and every node is idle."""
        deadline = time.monotonic() + timeout
        while self.slurm("squeue", "-h", "-o", "%i", check=False).stdout.strip():
            if time.monotonic() > deadline:
                raise RuntimeError(f"Slurm jobs still queued after {timeout:g} s: "
                                   f"{self.slurm('squeue', check=False).stdout}")
            time.sleep(0.3)
        self.wait_idle(timeout=max(1.0, deadline - time.monotonic()))

    def log_tail(self, lines: int = 20) -> str:
        out = []
        for log in sorted((self.dir or Path("/nonexistent")).glob("log/*.log")):
            text = log.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {log.name}\n" + "\n".join(text))
        return "\n".join(out)

    # ---- bring-up (start(), __enter__ and tear-down on any exit: lifecycle.Lifecycle) ---------------

    def bring_up(self) -> None:
        STATE_ROOT.mkdir(mode=0o755, parents=True, exist_ok=True)
        self.dir = Path(tempfile.mkdtemp(prefix=f"{PREFIX}-{self.tag}-", dir=STATE_ROOT))
        for sub in ("etc", "state", "spool", "log", "run", "munge"):
            (self.dir / sub).mkdir()
        self.dir.chmod(0o755)  # munged refuses group/world-writable parents of its socket
        self.gateway = str(self.network.network_address + 1)
        self.ctl_host = f"{PREFIX}-{self.tag}-ctl"
        for k in range(self.switches):
            for j in range(self.per_switch):
                i = k * self.per_switch + j
                self.nodes.append(Node(name=f"{PREFIX}-{self.tag}-n{i}", switch=self.leaf_switches[k],
                                       netns=f"{PREFIX}-{self.tag}-n{i}", veth=f"{PREFIX}{self.tag}v{i}",
                                       address=str(self.network.network_address + 10 + i)))
        self._make_network()
        self._start_munge()
        self._write_config()
        self._start_slurmctld()
        for node in self.nodes:
            self._start_slurmd(node)
        self.wait_idle()

    def _link(self, *argv: str, name: str) -> None:
        _run(["ip", "link", "add", name, *argv])
        self._links.append(name)

    def _make_network(self) -> None:
        prefix = self.network.prefixlen
        spine = f"{PREFIX}{self.tag}p"
        self._link("type", "bridge", name=spine)
        _run(["ip", "addr", "add", f"{self.gateway}/{prefix}", "dev", spine])
        _run(["ip", "link", "set", spine, "up"])
        for k, leaf in enumerate(self.leaf_switches):
            self._link("type", "bridge", name=leaf)
            _run(["ip", "link", "set", leaf, "up"])
            up_a, up_b = f"{PREFIX}{self.tag}u{k}a", f"{PREFIX}{self.tag}u{k}b"
            self._link("type", "veth", "peer", "name", up_b, name=up_a)
            _run(["ip", "link", "set", up_a, "master", leaf, "up"])
            _run(["ip", "link", "set", up_b, "master", spine, "up"])
            if k == self.switches - 1 and self.switches > 1:
                for dev in (up_a, up_b):  # the slow leaf: 1 Gbit/s both ways
                    _run(["tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", UPLINK_RATE,
                          "burst", "256kb", "latency", "50ms"])
        for node in self.nodes:
            _run(["ip", "netns", "add", node.netns])
            self._netns.append(node.netns)
            _run(["ip", "link", "add", node.veth, "type", "veth", "peer", "name", "eth0", "netns", node.netns])
            self._links.append(node.veth)
            _run(["ip", "link", "set", node.veth, "master", node.switch, "up"])
            _run(["ip", "-n", node.netns, "addr", "add", f"{node.address}/{prefix}", "dev", "eth0"])
            _run(["ip", "-n", node.netns, "link", "set", "eth0", "up"])
            _run(["ip", "-n", node.netns, "link", "set", "lo", "up"])
            _run(["ip", "-n", node.netns, "route", "add", "default", "via", self.gateway])

    def _start_munge(self) -> None:
        munge = self.dir / "munge"
        munge.chmod(0o700)
        key = munge / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o400)
        self.munge_socket = munge / "munge.sock"
        argv = ["munged", "--foreground", "--force", f"--socket={self.munge_socket}", f"--key-file={key}",
                f"--pid-file={munge / 'munged.pid'}", f"--seed-file={munge / 'munged.seed'}",
                f"--log-file={self.dir / 'log' / 'munged.log'}"]
        self._spawn(argv, "munged")
        self._wait(lambda: self.munge_socket.exists(), "munged's socket")

    def _write_config(self) -> None:
        self.ctl_port = _free_port()
        self.slurmd_port = _free_port()
        d = self.dir
        node_lines = [f"NodeName={n.name} NodeAddr={n.address} NodeHostname={n.name} CPUs={self.cpus} "
                      f"State=UNKNOWN" for n in self.nodes]
        nodes = ",".join(n.name for n in self.nodes)
        self.conf.write_text("\n".join([
            f"ClusterName={PREFIX}{self.tag}",
            f"SlurmctldHost={self.ctl_host}({self.gateway})",
            f"SlurmctldPort={self.ctl_port}",
            f"SlurmdPort={self.slurmd_port}",
            f"AuthType=auth/munge",
            f"CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={d / 'state'}",
            f"SlurmdSpoolDir={d / 'spool'}/%n",
            f"SlurmctldPidFile={d / 'run' / 'slurmctld.pid'}",
            f"SlurmdPidFile={d / 'run'}/slurmd-%n.pid",
            f"SlurmctldLogFile={d / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={d / 'log'}/slurmd-%n.log",
            f"PlugStackConfig={d / 'etc' / 'plugstack.conf'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "SchedulerType=sched/backfill",
            "TopologyPlugin=topology/tree",
            "MpiDefault=none",
            "ReturnToService=2",
            # a failed node is noticed quickly (the node-failure test waits for it)
            "SlurmdTimeout=5",
            "MessageTimeout=5",
            "InactiveLimit=0",
            "KillWait=2",
            "MinJobAge=600",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            *node_lines,
            f"PartitionName={self.partition} Nodes={nodes} Default=YES MaxTime=INFINITE State=UP",
            "",
        ]))
        (d / "etc" / "plugstack.conf").write_text("")
        self.node_tmp.mkdir(exist_ok=True)
        (d / "etc" / "mpi.conf").write_text(f"PMIxCliTmpDirBase={self.node_tmp}\n")
        topo = [f"SwitchName={leaf} Nodes={','.join(n.name for n in self.nodes if n.switch == leaf)}"
                for leaf in self.leaf_switches]
        topo.append(f"SwitchName={PREFIX}{self.tag}p Switches={','.join(self.leaf_switches)}")
        (d / "etc" / "topology.conf").write_text("\n".join(topo) + "\n")

    def _start_slurmctld(self) -> None:
        # its own UTS namespace: slurmctld runs only where the hostname is SlurmctldHost's name
        argv = ["unshare", "--uts", "--", "sh", "-c", 'hostname "$0" && exec "$@"', self.ctl_host,
                "slurmctld", "-D", "-i", "-f", str(self.conf)]
        self._spawn(argv, "slurmctld")
        self._wait(lambda: self.slurm("scontrol", "ping", check=False).stdout.count("UP") > 0, "slurmctld")

    def _start_slurmd(self, node: Node) -> None:
        # its own UTS namespace (hostname) and mount namespace: the node's private temp dir is bound over
        # the shared node_tmp path, as a cluster node has its own /tmp (srun --mpi=pmix makes a directory
        # there named by job and step only: nodes sharing one would collide)
        private = self.dir / "tmp" / node.name
        private.mkdir(parents=True, exist_ok=True)
        argv = ["nsenter", f"--net=/run/netns/{node.netns}", "unshare", "--uts", "--mount", "--propagation",
                "private", "--", "sh", "-c", 'hostname "$0" && mount --bind "$1" "$2" && shift 2 && exec "$@"',
                node.name, str(private), str(self.node_tmp), "slurmd", "-D", "-N", node.name, "-f", str(self.conf)]
        node.proc = self._spawn(argv, f"slurmd-{node.name}-out")

    def _spawn(self, argv: list[str], log_name: str) -> subprocess.Popen:
        with open(self.dir / "log" / f"{log_name}.out", "ab") as log:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    env=self.env(), start_new_session=True)
        self.procs.append(proc)
        return proc

    def _wait(self, ready, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if ready():
                return
            dead = [p for p in self.procs if p.poll() is not None and p not in [n.proc for n in self.nodes]]
            if dead:
                raise RuntimeError(f"{dead[0].args[0]} exited {dead[0].returncode} while waiting for {what}:\n"
                                   f"{self.log_tail()}")
            time.sleep(0.1)
        raise RuntimeError(f"{what} not ready after {START_TIMEOUT:g} s:\n{self.log_tail()}")

    # ---- tear-down --------------------------------------------------------------------------

    def teardown_steps(self):
        return [self._cancel_jobs, self._kill_all, self._delete_network]

    def remove_files(self) -> None:
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            try:
                STATE_ROOT.rmdir()  # only when no other cluster's directory is there
            except OSError:
                pass

    def _cancel_jobs(self) -> None:
        if self.dir is not None and self.conf.exists() and any(p.poll() is None for p in self.procs):
            self.slurm("scancel", "--full", f"--partition={self.partition}", timeout=10, check=False)

    def _kill_all(self) -> None:
        pids = [p.pid for p in self.procs if p.poll() is None]
        for netns in self._netns:
            pids += _netns_pids(netns)
        # job steps that ran on a node (slurmstepd, mpirun's daemons) belong to its namespace
        kill(sorted(set(pids)), grace=3.0)
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    def _delete_network(self) -> None:
        problems = []
        for netns in reversed(self._netns):
            done = _run(["ip", "netns", "delete", netns], check=False)
            if done.returncode != 0 and netns in _run(["ip", "netns", "list"]).stdout.split():
                problems.append(done.stderr.strip())
        existing = set(_links())
        for link in reversed(self._links):
            if link in existing:
                _run(["ip", "link", "delete", link], check=False)
        left = [name for name in _links() if name.startswith(f"{PREFIX}{self.tag}")] if self.tag else []
        if left or problems:
            raise RuntimeError(f"left behind: {left} {problems}")
