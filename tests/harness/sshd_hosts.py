"""SSH hosts for tests: real sshd instances, each in its own network, UTS and mount namespace, on one bridge.

Each host looks like a small cluster node from outside: its own address on a private /24, its
own hostname, its own host key and its own ``~/.ssh`` (a per-host directory bind-mounted over
root's ``~/.ssh`` in that host's mount namespace only), reached from this machine (the
controller and head node) through a bridge with a host-side address. The filesystem is shared,
which is what makes "the venv is at the same absolute path on every host" true here.

    with SshdHosts(2) as hosts:
        subprocess.run(hosts.ssh_argv(hosts["h0"], "hostname"), check=True)

Everything it creates is named ``vnbt-*`` (namespaces) or ``vnbt*`` (links); leaving the
context, or a failure while starting, kills every process in the namespaces, closes ssh
control masters under its directory, and deletes the namespaces, the bridge and the directory.
"""

import ipaddress
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from vnetbench.core.procs import kill
from vnetbench.topologies.thishost import linux

from .lifecycle import Lifecycle, links as _links, netns_names as _netns_names, netns_pids as _netns_pids, run

PREFIX = "vnbt"
# the netns backend takes its subnets from 10.213.0.0/16; stay out of its way
POOL = ipaddress.IPv4Network("10.214.0.0/16")
SSHD = "/usr/sbin/sshd"
START_TIMEOUT = 15.0

# Runs inside the new UTS and mount namespaces: bind-mount, set the hostname, become sshd.
_ENTER = """
import json, os, socket, subprocess, sys
spec = json.loads(sys.argv[1])
for src, dst in spec["binds"]:
    subprocess.run(["mount", "--bind", src, dst], check=True)
socket.sethostname(spec["hostname"])
os.execv(sys.argv[2], sys.argv[2:])
"""


def missing_requirements() -> str | None:
    """Why SSH hosts cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, bridges, bind mounts)"
    for tool in ("ip", "unshare", "mount", "ssh", "ssh-keygen"):
        if not shutil.which(tool):
            return f"{tool} is missing"
    if not os.access(SSHD, os.X_OK):
        return f"{SSHD} is missing (Debian: apt-get install openssh-server; scripts/test installs it)"
    return None


_run = run


@dataclass
class Host:
    name: str
    index: int
    netns: str
    veth: str
    address: str
    hostname: str
    dir: Path
    binds: list[tuple[str, str]] = field(default_factory=list)
    proc: subprocess.Popen | None = None

    @property
    def host_key(self) -> Path:
        return self.dir / "ssh_host_ed25519_key"

    @property
    def ssh_dir(self) -> Path:
        """What this host sees as root's ~/.ssh."""
        return self.dir / "dot-ssh"

    @property
    def log(self) -> Path:
        return self.dir / "sshd.log"

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class SshdHosts(Lifecycle):
    """``count`` SSH hosts named h0, h1, ... (or ``names``), torn down on exit even after a failure.

    ``mesh``: give every host a key of its own that every other host accepts, and known_hosts
    for all of them, as a finished deployment has (the Ansible tests start without it).
    ``binds``: host name -> [(source, target)] extra bind mounts seen only by that host, to give
    one host a different file at the same path (a different installed version, for instance).
    """

    def __init__(self, count: int = 2, *, names: list[str] | None = None, mesh: bool = False,
                 binds: dict[str, list[tuple[str, str]]] | None = None):
        super().__init__()
        self.names = list(names or [f"h{i}" for i in range(count)])
        self.mesh = mesh
        self.extra_binds = binds or {}
        self.hosts: list[Host] = []
        self.dir: Path | None = None
        self.bridge = ""
        self.gateway = ""
        self._made_netns: list[str] = []
        self._made_links: list[str] = []
        self._made_root_ssh: Path | None = None

    # ---- the hosts as tests use them -------------------------------------------------------

    def __getitem__(self, name: str) -> Host:
        return next(h for h in self.hosts if h.name == name)

    def __iter__(self):
        return iter(self.hosts)

    @property
    def client_key(self) -> Path:
        return self.dir / "client_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.dir / "known_hosts"

    @property
    def control_dir(self) -> Path:
        """Where ssh control sockets of the tests' clients go (closed on exit)."""
        return self.dir / "cp"

    def ssh_options(self) -> list[str]:
        return ["-i", str(self.client_key), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
                "-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "StrictHostKeyChecking=yes",
                "-o", "ConnectTimeout=5"]

    def ssh_argv(self, host: Host, *command: str) -> list[str]:
        return ["ssh", *self.ssh_options(), f"root@{host.address}", *command]

    def unused_address(self) -> str:
        """An address on the hosts' network where nothing answers (an unreachable host)."""
        return str(self.network.network_address + 250)

    def host_vars(self, host: Host) -> dict:
        """Ansible connection variables for ``host`` (what an inventory of it says)."""
        return {
            "ansible_host": host.address,
            "ansible_user": "root",
            "ansible_port": 22,
            "ansible_ssh_private_key_file": str(self.client_key),
            "ansible_ssh_common_args": f"-o UserKnownHostsFile={self.known_hosts} -o StrictHostKeyChecking=yes "
                                       "-o IdentitiesOnly=yes",
            # the tests' own Python has what Ansible's modules need (ansible-core brings packaging)
            "ansible_python_interpreter": sys.executable,
            "vnetbench_ssh_host_key_file": f"{host.host_key}.pub",
        }

    def write_inventory(self, path: Path, groups: dict[str, list[str]], *, all_vars: dict | None = None,
                        host_vars: dict[str, dict] | None = None) -> Path:
        """A YAML Ansible inventory of these hosts in ``groups`` (group -> host names)."""
        host_vars = host_vars or {}
        children = {}
        for group, members in groups.items():
            children[group] = {"hosts": {name: ({**self.host_vars(self[name]), **host_vars.get(name, {})}
                                                if name in self.names else host_vars.get(name, {}))
                                         for name in members}}
        data = {"all": {"vars": {"vnetbench_network": str(self.network), **(all_vars or {})},
                        "children": children}}
        Path(path).write_text(yaml.safe_dump(data, sort_keys=False))
        return Path(path)

    # ---- bring-up (start(), __enter__ and tear-down on any exit: lifecycle.Lifecycle) ---------------

    PREFIX, POOL, WHAT = PREFIX, POOL, "SSH hosts"
    missing_requirements = staticmethod(missing_requirements)

    def bring_up(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"{PREFIX}-"))
        self.control_dir.mkdir()
        tag = self.tag
        self.bridge = f"{PREFIX}{tag}"
        self.gateway = str(self.network.network_address + 1)
        _keygen(self.client_key, "vnetbench-test-controller")
        (self.dir / "controller_authorized_keys").write_text(Path(f"{self.client_key}.pub").read_text())
        root_ssh = Path(pwd.getpwuid(0).pw_dir) / ".ssh"
        if not root_ssh.exists():
            # the bind-mount target must exist; removed again on close when no harness needs it (a harness sees
            # only its own lane's namespaces: for two lanes, tests/harness/lanes.py makes it for the whole run)
            root_ssh.mkdir(mode=0o700)
            self._made_root_ssh = root_ssh
        for i, name in enumerate(self.names):
            host_dir = self.dir / name
            host_dir.mkdir()
            host = Host(name=name, index=i, netns=f"{PREFIX}-{tag}-{name}", veth=f"{PREFIX}{tag}{name}"[:15],
                        address=str(self.network.network_address + 10 + i), hostname=f"{PREFIX}-{tag}-{name}",
                        dir=host_dir)
            host.ssh_dir.mkdir(mode=0o700)
            host.binds = [(str(host.ssh_dir), str(root_ssh)), *self.extra_binds.get(name, [])]
            _keygen(host.host_key, host.hostname)
            self.hosts.append(host)
        self._make_network()
        lines = [f"{h.address} {Path(f'{h.host_key}.pub').read_text().split()[0]} "
                 f"{Path(f'{h.host_key}.pub').read_text().split()[1]}" for h in self.hosts]
        self.known_hosts.write_text("\n".join(lines) + "\n")
        if self.mesh:
            self._make_mesh()
        for host in self.hosts:
            self.start_sshd(host)

    def _make_network(self) -> None:
        prefix = self.network.prefixlen
        # mpirun on this host reaches the hosts from this bridge's address: numbered as the product numbers a
        # topology's head bridge, so that Open MPI 5's launcher can match it (vnetbench.topologies.thishost.linux)
        linux.add_bridge(self.bridge)
        self._made_links.append(self.bridge)
        _run(["ip", "addr", "add", f"{self.gateway}/{prefix}", "dev", self.bridge])
        _run(["ip", "link", "set", self.bridge, "up"])
        for host in self.hosts:
            _run(["ip", "netns", "add", host.netns])
            self._made_netns.append(host.netns)
            _run(["ip", "link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", host.netns])
            _run(["ip", "link", "set", host.veth, "master", self.bridge, "up"])
            _run(["ip", "-n", host.netns, "addr", "add", f"{host.address}/{prefix}", "dev", "eth0"])
            _run(["ip", "-n", host.netns, "link", "set", "eth0", "up"])
            _run(["ip", "-n", host.netns, "link", "set", "lo", "up"])

    def _make_mesh(self) -> None:
        keys = {}
        for host in self.hosts:
            _keygen(host.ssh_dir / "id_ed25519", f"root@{host.hostname}")
            keys[host.name] = (host.ssh_dir / "id_ed25519.pub").read_text()
        known = []
        for host in self.hosts:
            kind, key = Path(f"{host.host_key}.pub").read_text().split()[:2]
            known.append(f"{host.address},{host.name},{host.hostname} {kind} {key}")
        for host in self.hosts:
            (host.ssh_dir / "authorized_keys").write_text("".join(keys.values()))
            (host.ssh_dir / "known_hosts").write_text("\n".join(known) + "\n")

    def _sshd_config(self, host: Host) -> Path:
        config = host.dir / "sshd_config"
        config.write_text("\n".join([
            f"ListenAddress {host.address}",
            "Port 22",
            f"HostKey {host.host_key}",
            "PidFile none",
            f"AuthorizedKeysFile .ssh/authorized_keys {self.dir / 'controller_authorized_keys'}",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            # the key files live under /tmp, which StrictModes refuses (world-writable parent)
            "StrictModes no",
            "UseDNS no",
            "PrintMotd no",
            # mpirun and Ansible open many sessions at once
            "MaxStartups 100:30:200",
            "MaxSessions 100",
            "Subsystem sftp internal-sftp",
            "",
        ]))
        return config

    def start_sshd(self, host: Host) -> None:
        """Start (or restart) ``host``'s sshd and wait until it answers."""
        if not Path("/run/sshd").is_dir():
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation directory
        spec = json.dumps({"hostname": host.hostname, "binds": host.binds})
        argv = ["ip", "netns", "exec", host.netns, "unshare", "--uts", "--mount", "--propagation", "private", "--",
                sys.executable, "-c", _ENTER, spec, SSHD, "-D", "-e", "-f", str(self._sshd_config(host))]
        with open(host.log, "ab") as log:
            host.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if host.proc.poll() is not None:
                raise RuntimeError(f"sshd of {host.name} exited {host.proc.returncode}:\n{host.log_tail()}")
            if _banner(host.address):
                return
            time.sleep(0.05)
        raise RuntimeError(f"sshd of {host.name} did not answer on {host.address}:22 in {START_TIMEOUT:g} s:\n"
                           f"{host.log_tail()}")

    def restart_sshd(self, host: Host, extra_binds: list[tuple[str, str]] = ()) -> None:
        """Restart ``host``'s sshd with ``extra_binds`` (and its ~/.ssh), or without any when none are given."""
        self.stop_sshd(host)
        host.binds = [host.binds[0], *extra_binds]
        self.start_sshd(host)

    def stop_sshd(self, host: Host) -> None:
        """Kill ``host``'s sshd and everything running in its namespace (the host stays, refusing SSH)."""
        kill(_netns_pids(host.netns), grace=3.0)
        if host.proc is not None:
            try:
                host.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            host.proc = None

    # ---- tear-down -------------------------------------------------------------------------

    def teardown_steps(self):
        return [self._close_masters, self._kill_all, self._delete_network]

    def remove_files(self) -> None:
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
        if self._made_root_ssh is not None and not any(n.startswith(f"{PREFIX}-") for n in _netns_names()):
            try:
                self._made_root_ssh.rmdir()  # only if still empty
            except OSError:
                pass

    def _close_masters(self) -> None:
        if self.dir is None or not self.control_dir.is_dir():
            return
        for sock in self.control_dir.iterdir():
            subprocess.run(["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "vnbt-control"],
                           capture_output=True, timeout=10)

    def _kill_all(self) -> None:
        pids = []
        for name in self._made_netns:
            pids += _netns_pids(name)
        kill(pids, grace=3.0)
        for host in self.hosts:
            if host.proc is not None:
                try:
                    host.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass

    def _delete_network(self) -> None:
        failed = []
        for name in self._made_netns:
            if _run(["ip", "netns", "del", name], check=False).returncode != 0 and name in _netns_names():
                failed.append(name)
        for link in self._made_links:
            if _run(["ip", "link", "del", link], check=False).returncode != 0 and link in _links():
                failed.append(link)
        if failed:
            raise RuntimeError(f"could not delete {', '.join(failed)}")


def _keygen(path: Path, comment: str) -> None:
    _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])


def _banner(address: str) -> bool:
    try:
        with socket.create_connection((address, 22), timeout=0.5) as sock:
            sock.settimeout(1.0)
            return sock.recv(8).startswith(b"SSH-")
    except OSError:
        return False
