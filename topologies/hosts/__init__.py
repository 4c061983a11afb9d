"""The ``hosts`` backend: real machines reached by SSH, each host standing for a VM of the study's topologies.

A hosts topology (``model.HostsTopology``) is hosts with an address, a switch, a number of slots and how to reach
them by SSH, and the network their MPI traffic must stay on. Its refs:

- ``hostfile:PATH``: an Open MPI hostfile (``HOST [slots=N]``, with ``# vnetbench: ...`` comments: ``hostfile``);
- ``inventory:PATH``: an Ansible inventory, YAML or INI, with group_vars/ and host_vars/ beside it, or anything
  ansible-inventory reads when ansible-core is installed (``inventory``): the hosts of its group ``compute``, or
  every host when it has none;
- ``inventory:PATH#GROUP``: the hosts of the inventory's group GROUP; ``#all`` is every host, which then need not
  say a switch (a head node has none): what ``hosts check --inventory PATH`` checks, ``--group G`` being ``#G``;
- ``hosts:PATH``, or a bare PATH: a hostfile or an inventory as its content says (``claims``), or a YAML topology
  with ``backend: hosts``, in one of two forms: the topology file (``hosts:`` with ``address``, ``switch``,
  ``slots``, ``ssh``; what ``to_dict`` and the Ansible role vnetbench_hostfile write), or a VM topology whose
  VMs are each on a host with an address (``from_data``).

``python -m vnetbench.topologies.hosts FILE [--group GROUP]`` prints FILE as a topology file, or why it is not one
(exit 2): the Ansible role's check before it writes one.

Realised, the hosts are up by definition: realising checks that they answer SSH, launching writes an Open MPI
hostfile of the slots the ranks use; the launcher (``--mpi``) is started by absolute path, and finds its daemons
(``--prefix``) and the ranks their Python at the same absolute paths on every host. ``hosts check``, ``facts``
and ``fetch`` reach the hosts with Fabric (``remote``).

Its parts: ``model`` (the one model, validated once), ``refs`` (which reader a ref or file is for),
``hostfile``, ``inventory`` and ``ansible_inventory`` (the readers), ``reading`` (what they share),
``remote`` (check, facts, fetch over SSH).
"""

import socket
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from vnetbench.core.errors import LaunchError, UsageError

from ..base import Backend, LaunchSpec, idle_vms, register
from ..launch.sshlaunch import SSH_DEFAULTS, SshHost, ssh_launch, write_hostfile
from . import model, refs
from .model import HostsTopology, Ssh

REACH_TIMEOUT = 5.0


@register("hosts")
class HostsBackend(Backend):
    """Hosts that are up by definition: realising checks they answer, launching writes a hostfile."""

    # ---- refs and specs ------------------------------------------------------------------

    @classmethod
    def load(cls, ref: str, what: str = "--topology") -> HostsTopology:
        found = refs.read(ref, what)
        if isinstance(found, refs.TopologyFile):
            return cls.from_data(found.data, found.source, found.lines)
        return found

    @classmethod
    def claims(cls, path, text: str) -> bool:
        return refs.claims(path, text)

    @classmethod
    def from_data(cls, data: dict, source: str, lines=None) -> HostsTopology:
        if isinstance(data, dict) and "vms" in data:  # a VM topology: validated as every VM topology is
            from ..model.spec import from_dict

            return model.from_vms(from_dict(data, source=source, lines=lines))
        return model.from_file(data, source, lines)

    # ---- before bring-up -----------------------------------------------------------------

    @classmethod
    def cannot_place(cls, topology, ranks: int) -> str | None:
        # a VM topology's VMs are hosts, each to get a rank; an inventory's hosts fill slot by slot
        return idle_vms(len(topology.hosts), ranks) if topology.hosts_are_vms else None

    @classmethod
    def show(cls, topology, preview: dict) -> list:
        return [f"backend hosts, placement {topology.placement}, subnet {topology.subnet}, "
                f"{topology.slots} slot(s) on {len(topology.hosts)} host(s)", "",
                (["HOST", "ADDRESS", "SWITCH", "SLOTS"], [[h.name, h.address, h.switch, h.slots] for h in topology.hosts])]

    # ---- hosts ---------------------------------------------------------------------------

    @classmethod
    def check_hosts(cls, topology, *, venv, timeout, clock_tolerance, mpi):
        from . import remote

        return remote.check(topology, venv=venv, timeout=timeout, clock_tolerance=clock_tolerance, mpi=mpi)

    @classmethod
    def facts(cls, topology, *, venv, timeout):
        from . import remote

        return remote.facts(topology, venv=venv, timeout=timeout)

    @classmethod
    def fetch(cls, topology, remote_path: str, add, *, timeout):
        from . import remote

        return remote.fetch(topology, remote_path, add, timeout=timeout)

    # ---- realised ------------------------------------------------------------------------

    def __init__(self, topology: HostsTopology, *, check_reachable: bool = True):
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
        hosts = [SshHost(host.name, host.address, host.switch, host.slots) for host in topo.hosts]
        return ssh_launch(hosts, topo.place(ranks), placement=topo.placement, subnet=topo.subnet,
                          ssh_args=launch_ssh(topo).argv(), bind=bind, hostfile=self._write_hostfile)

    def describe(self) -> dict:
        described = super().describe()
        described["source"] = self.topology.source
        return described

    def _write_hostfile(self, entries) -> str:
        if self._dir is None:
            from vnetbench.core import rundir

            self._dir = str(rundir.make_dir("hosts"))
        return write_hostfile(Path(self._dir), entries)

    def close(self) -> None:
        if self._dir is not None:
            from vnetbench.core import rundir

            rundir.remove_dir(Path(self._dir))
            self._dir = None


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
    def probe(host):
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


# the name the hosts backend's realised topologies had before it was a package (tests/mpi_flavours use it)
HostsRealised = HostsBackend
