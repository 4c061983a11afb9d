"""The hosts backend: the same topology over real machines reached by SSH, each host standing for a VM.

``HostsTopology`` is what ``inventory.load_hosts`` makes of an Open MPI hostfile or an Ansible
inventory: hosts with an address, a switch and a number of slots, the network their MPI
traffic must stay on, and how to reach them by SSH. ``HostsRealised`` launches ranks on them
with this virtual environment's mpirun, by absolute path; Open MPI finds its daemon and the
ranks their Python at the same absolute path on every host (``--prefix``).
"""

import ipaddress
import re
import socket
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from vnetbench.errors import LaunchError, SpecError, UsageError

from .base import LaunchSpec, Realised, idle_vms, register
from .intent import Intent, tcp_transport
from .units import TOPOLOGY_NAME_RE
from .binding import binding

DEFAULT_SWITCH = "default"
DEFAULT_NAME = "hosts"
HOST_NAME_RE = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,253})\Z")
SWITCH_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,62})\Z")
MAX_SLOTS = 4096
REACH_TIMEOUT = 5.0
# ssh never asks for a password under mpirun, and gives up on a silent host
SSH_DEFAULTS = ("-o", "BatchMode=yes", "-o", "ConnectTimeout=10")


@dataclass(frozen=True)
class Ssh:
    """How the launching machine reaches a host: ``ssh [-l user] [-p port] [-i identity] [options] host``."""

    user: str | None = None
    port: int = 22
    identity: str | None = None
    options: tuple[str, ...] = ()

    def argv(self, connect_timeout: int | None = None) -> list[str]:
        """ssh's options (before the host): the one place they are built, for mpirun and for host checks."""
        args = list(SSH_DEFAULTS)
        if connect_timeout is not None:
            args[-1] = f"ConnectTimeout={connect_timeout}"
        if self.user:
            args += ["-l", self.user]
        if self.port != 22:
            args += ["-p", str(self.port)]
        if self.identity:
            args += ["-i", self.identity]
        return args + list(self.options)

    def to_dict(self) -> dict:
        data = {"user": self.user, "port": self.port, "identity": self.identity, "options": list(self.options)}
        return {key: value for key, value in data.items() if value not in (None, [], 22)}


@dataclass(frozen=True)
class HostEntry:
    name: str
    address: str
    switch: str
    slots: int = 1
    ssh: Ssh = field(default_factory=Ssh)

    def to_dict(self) -> dict:
        data = {"name": self.name, "address": self.address, "switch": self.switch, "slots": self.slots}
        if self.ssh.to_dict():
            data["ssh"] = self.ssh.to_dict()
        return data


@dataclass(frozen=True)
class HostsTopology:
    """Real hosts as a topology; built by ``inventory.load_hosts``, checked by ``validate``."""

    name: str
    hosts: tuple[HostEntry, ...]
    subnet: str
    placement: str = "block"
    venv: str | None = None
    source: str = "<hosts>"
    backend: ClassVar[str] = "hosts"

    @property
    def switches(self) -> list[str]:
        return list(dict.fromkeys(host.switch for host in self.hosts))

    @property
    def slots(self) -> int:
        return sum(host.slots for host in self.hosts)

    def host(self, name: str) -> HostEntry:
        return next(host for host in self.hosts if host.name == name)

    def to_dict(self) -> dict:
        """The topology file's content: ``from_dict`` of it gives this topology again."""
        data = {"version": 1, "name": self.name, "backend": self.backend, "subnet": self.subnet,
                "placement": self.placement, "switches": [{"name": name} for name in self.switches],
                "hosts": [host.to_dict() for host in self.hosts]}
        if self.venv:
            data["venv"] = self.venv
        return data

    def place(self, ranks: int) -> list[int]:
        """The host index of each rank, as ``--map-by slot`` (block) or ``--map-by node`` place them."""
        if ranks > self.slots:
            per_host = ", ".join(f"{host.name} {host.slots}" for host in self.hosts)
            raise UsageError(f"--ranks: {ranks} ranks need more slots than the hosts have ({self.slots}: "
                             f"{per_host}); give hosts more slots (slots= in the hostfile, vnetbench_slots "
                             f"in the inventory)")
        if self.placement == "block":
            order = [i for i, host in enumerate(self.hosts) for _ in range(host.slots)]
            return order[:ranks]
        left, order = [host.slots for host in self.hosts], []
        while len(order) < ranks:
            for i in range(len(left)):
                if left[i] and len(order) < ranks:
                    order.append(i)
                    left[i] -= 1
        return order


def validate(topology: HostsTopology) -> HostsTopology:
    """``topology`` if it is sound, else SpecError naming each problem's field (``hostspec``)."""
    from .hostspec import validate as validated

    return validated(topology)


def from_dict(data, source: str = "<hosts>") -> HostsTopology:
    """The topology file's mapping -> a validated HostsTopology (SpecError naming the field)."""
    from .hostspec import from_dict as validated

    return validated(data, source)


def from_spec(topology) -> HostsTopology:
    """A spec ``Topology`` with ``backend: hosts`` (each VM on the host of its name) as a HostsTopology."""
    if isinstance(topology, HostsTopology):
        return topology
    source = getattr(topology, "source", "<spec>")
    addresses = {host.name: host.address for host in topology.hosts}
    hosts = []
    for vm in topology.vms:
        where = vm.host or vm.name
        if not addresses.get(where):
            raise SpecError(f"{source}: VM {vm.name!r}: no host {where!r} with an address; on the hosts backend "
                            f"each VM is a host: give hosts[].address")
        hosts.append(HostEntry(name=vm.name, address=addresses[where], switch=vm.switch, slots=vm.vcpus))
    subnet = str(topology.subnet) if topology.subnet else derived_subnet(hosts, source)
    return validate(HostsTopology(name=topology.name, hosts=tuple(hosts), subnet=subnet,
                                  placement=topology.placement, source=source))


# ---- field checks (shared with inventory.py) ---------------------------------------------

def no_unknown(data: dict, allowed: set[str], source: str, where: str) -> None:
    unknown = sorted(set(map(str, data)) - allowed)
    if unknown:
        import difflib

        prefix = f"{where}: " if where else ""
        close = difflib.get_close_matches(unknown[0], sorted(allowed), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise SpecError(f"{source}: {prefix}unknown field {unknown[0]!r}{hint}; allowed: {', '.join(sorted(allowed))}")


def whole_number(value, source: str, where: str) -> int:
    if isinstance(value, bool):
        raise SpecError(f"{source}: {where}: {value!r} is not a whole number")
    try:
        return int(str(value), 10)
    except ValueError:
        raise SpecError(f"{source}: {where}: {value!r} is not a whole number") from None


def host_name(value, source: str, where: str) -> str:
    if not isinstance(value, str) or not HOST_NAME_RE.match(value):
        raise SpecError(f"{source}: {where} {value!r} is not a host name (letters, digits, '.', '-', '_')")
    return value


def switch_name(value, source: str, host: str) -> str:
    if not isinstance(value, str) or not SWITCH_RE.match(value):
        raise SpecError(f"{source}: host {host!r}: switch {value!r} is not a switch name (letters, digits, "
                        f"'.', '-', '_')")
    return value


def topology_name(value, source: str) -> str:
    if not isinstance(value, str) or not TOPOLOGY_NAME_RE.match(value):
        raise SpecError(f"{source}: name (vnetbench_topology_name): {value!r} is not a topology name: use 1 to 32 "
                        f"lower-case letters, digits and '-'")
    return value


def derived_subnet(hosts, source: str) -> str:
    networks = {ipaddress.IPv4Network(f"{h.address}/24", strict=False) for h in hosts if is_ipv4(h.address)}
    if len(networks) == 1:
        return str(networks.pop())
    raise SpecError(f"{source}: the hosts are not on one /24 network ({', '.join(sorted(map(str, networks)))}); "
                    f"say which network MPI traffic stays on: vnetbench_network in the inventory, or "
                    f"'# vnetbench: network=CIDR' in the hostfile")


def is_ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
        return True
    except ValueError:
        return False


def launch_ssh(topology: HostsTopology) -> Ssh:
    """The SSH settings mpirun uses for every host (PRRTE has one set for all)."""
    first = topology.hosts[0]
    for host in topology.hosts[1:]:
        if host.ssh != first.ssh:
            raise UsageError(f"host {host.name!r}: its SSH settings ({_shown(host.ssh)}) differ from host "
                             f"{first.name!r}'s ({_shown(first.ssh)}); mpirun reaches every host with one set "
                             f"of SSH options")
    for arg in first.ssh.argv():
        if not arg or any(c.isspace() for c in arg):
            raise UsageError(f"host {first.name!r}: SSH option {arg!r} contains white space, which mpirun's "
                             f"plm_ssh_args cannot carry")
    return first.ssh


def _shown(ssh: Ssh) -> str:
    return " ".join(ssh.argv()[len(SSH_DEFAULTS):]) or "defaults"


def unreachable(topology: HostsTopology, timeout: float = REACH_TIMEOUT) -> dict[str, str]:
    """host name -> why its SSH port does not answer, for every host that does not (in parallel)."""
    def probe(host: HostEntry):
        try:
            with socket.create_connection((host.address, host.ssh.port), timeout=timeout):
                return None
        except socket.timeout:
            return f"{host.address}:{host.ssh.port}: no answer in {timeout:g} s"
        except OSError as exc:
            return f"{host.address}:{host.ssh.port}: {exc.strerror or exc}"

    with ThreadPoolExecutor(max_workers=min(32, len(topology.hosts))) as pool:
        results = list(pool.map(probe, topology.hosts))
    return {host.name: why for host, why in zip(topology.hosts, results) if why}


@register("hosts")
class HostsRealised(Realised):
    """Hosts that are up by definition: realising checks they answer, launching writes a hostfile."""

    @classmethod
    def cannot_place(cls, topology, ranks: int) -> str | None:
        # a spec topology's VMs are hosts, each to get a rank; an inventory's hosts fill slot by slot
        return None if isinstance(topology, HostsTopology) else idle_vms(len(topology.vms), ranks)

    @classmethod
    def show(cls, topology, preview: dict) -> list:
        return [f"backend hosts, placement {topology.placement}, subnet {topology.subnet}, "
                f"{topology.slots} slot(s) on {len(topology.hosts)} host(s)", "",
                (["HOST", "ADDRESS", "SWITCH", "SLOTS"], [[h.name, h.address, h.switch, h.slots] for h in topology.hosts])]

    @classmethod
    def claims(cls, path, text: str) -> bool:
        from .inventory import is_hosts_file

        return is_hosts_file(path)

    @classmethod
    def load(cls, ref: str, what: str = "--topology"):
        from .inventory import load_hosts

        kind, sep, rest = ref.partition(":")
        if sep and kind in ("hostfile", "inventory", "hosts") and not Path(ref).exists():
            if kind == "hostfile":
                return load_hosts(hostfile=rest)
            if kind == "inventory":
                return load_hosts(inventory=rest)
            ref = rest
        return load_hosts(ref)

    @classmethod
    def from_data(cls, data: dict, source: str, lines=None):
        from .spec import from_dict as spec_from_dict

        return spec_from_dict(data, source=source, lines=lines)

    @classmethod
    def check_hosts(cls, topology, *, venv, timeout, clock_tolerance, mpi):
        from vnetbench import hosts  # (moves into this backend)

        return hosts.check(topology, venv=venv, timeout=timeout, clock_tolerance=clock_tolerance, mpi=mpi)

    def __init__(self, topology, *, check_reachable: bool = True):
        topology = from_spec(topology)
        super().__init__(topology)
        self._dir: str | None = None
        launch_ssh(topology)
        if topology.venv and Path(sys.prefix).resolve() != Path(topology.venv).resolve():
            raise UsageError(f"{topology.source}: the hosts have vnetbench in {topology.venv} (vnetbench_venv), but "
                             f"this vnetbench runs from {sys.prefix}; run {topology.venv}/bin/vnetbench, so that "
                             f"mpirun, its daemons and the ranks are at the same path on every host")
        if check_reachable:
            down = unreachable(topology)
            if down:
                raise LaunchError("hosts not reachable over SSH: " + "; ".join(
                    f"{name} ({why})" for name, why in down.items()))

    def check_ranks(self, ranks: int) -> None:
        self.topology.place(ranks)

    def launch(self, ranks: int, bind: str | None = None) -> LaunchSpec:
        topo = self.topology
        order = topo.place(ranks)
        counts = Counter(order)
        used = [i for i in range(len(topo.hosts)) if counts[i]]
        busiest = max(used, key=lambda i: (counts[i] / topo.hosts[i].slots, -i))
        mca, notes = binding(counts[busiest], topo.hosts[busiest].slots, bind)
        hostfile = self._write_hostfile([(topo.hosts[i], counts[i]) for i in used])
        prefix = str(Path(sys.prefix))
        mpi_mca = {**tcp_transport(topo.subnet), **mca}
        # --prefix: the daemons and the ranks find Open MPI at this path on every host (PRRTE sets
        # PATH and LD_LIBRARY_PATH from it in the remote shell). Not --leave-session-attached (it hung
        # mpirun now and then here): remote daemons end with mpirun, as they lose their lifeline.
        # plm_ssh_no_tree_spawn: every daemon is started from here, the hosts need not reach each other by SSH
        intent = Intent(ranks=ranks, hostfile=hostfile, map_by="slot" if topo.placement == "block" else "node",
                        bind=notes["bind"], oversubscribe=notes["oversubscribed"], prefix=prefix,
                        ssh_args=" ".join(launch_ssh(topo).argv()), prte={"plm_ssh_no_tree_spawn": "1"},
                        subnet=topo.subnet, mca=mpi_mca)
        expected, labels = [], []
        for i in order:
            host = topo.hosts[i]
            expected.append({"address": host.address})
            labels.append({"host": host.name, "vm": host.name, "switch": host.switch, "address": host.address})
        notes.update({"placement": topo.placement, "hosts": len(used), "prefix": prefix,
                      "ranks_per_host": {topo.hosts[i].name: counts[i] for i in used}})
        return LaunchSpec(intent=intent, expected_placement=expected, placement_labels=labels, notes=notes)

    def describe(self) -> dict:
        described = super().describe()
        described["source"] = self.topology.source
        return described

    def _write_hostfile(self, entries) -> str:
        if self._dir is None:
            from vnetbench import rundir

            self._dir = str(rundir.make_dir("hosts"))
        path = Path(self._dir) / f"hostfile-{len(list(Path(self._dir).iterdir()))}"
        path.write_text("".join(f"{host.address} slots={count}\n" for host, count in entries))
        return str(path)

    def close(self) -> None:
        if self._dir is not None:
            from vnetbench import rundir

            rundir.remove_dir(Path(self._dir))
            self._dir = None
