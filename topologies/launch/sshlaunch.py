"""Starting ranks on machines mpirun reaches by SSH: the hosts backend's hosts, the qemu backend's guests.

``ssh_argv`` is the one place ssh's options are built (for mpirun's plm_ssh_args and for host checks);
``ssh_launch`` the one launch intent over SSH, which every launcher flavour renders (PRRTE's plm_ssh_args,
ORTE's plm_rsh_args, a wrapper script for Hydra's -launcher-exec).
"""

import sys
from collections import Counter
from pathlib import Path
from typing import Callable, NamedTuple

from vnetbench.topologies.base import LaunchSpec
from .binding import binding
from .intent import Intent, tcp_transport

# ssh never asks for a password under mpirun, and gives up on a silent host
SSH_DEFAULTS = ("-o", "BatchMode=yes", "-o", "ConnectTimeout=10")


def ssh_argv(user: str | None = None, port: int = 22, identity: str | None = None, options=(),
             connect_timeout: int | None = None) -> list[str]:
    """ssh's options (before the host): ``[-l user] [-p port] [-i identity] [options]`` after the defaults."""
    args = list(SSH_DEFAULTS)
    if connect_timeout is not None:
        args[-1] = f"ConnectTimeout={connect_timeout}"
    if user:
        args += ["-l", user]
    if port != 22:
        args += ["-p", str(port)]
    if identity:
        args += ["-i", identity]
    return args + list(options)


class SshHost(NamedTuple):
    """A machine mpirun reaches by SSH, as ``ssh_launch`` places ranks on it: ``cores`` are what its ranks bind to."""

    name: str
    address: str
    switch: str
    cores: int


def ssh_launch(hosts: list[SshHost], order: list[int], *, placement: str, subnet: str, ssh_args: list[str], bind: str | None,
               hostfile: Callable[[list[tuple[str, int]]], str]) -> LaunchSpec:
    """How mpirun starts ranks on machines it reaches by SSH (the hosts backend's hosts, the qemu backend's guests):
    ``order`` is the host index of each rank; ``hostfile(entries)`` writes an Open MPI hostfile of (address,
    ranks) and returns its path. The one launch path over SSH: every flavour renders it (plm_ssh_args, ORTE's
    plm_rsh_args, Hydra's ssh wrapper)."""
    counts = Counter(order)
    used = [i for i in range(len(hosts)) if counts[i]]
    busiest = max(used, key=lambda i: (counts[i] / hosts[i].cores, -i))
    mca, notes = binding(counts[busiest], hosts[busiest].cores, bind)
    path = hostfile([(hosts[i].address, counts[i]) for i in used])
    prefix = str(Path(sys.prefix))
    mpi_mca = {**tcp_transport(subnet), **mca}
    # --prefix: the daemons and the ranks find Open MPI at this path on every host (PRRTE sets
    # PATH and LD_LIBRARY_PATH from it in the remote shell). Not --leave-session-attached (it hung
    # mpirun now and then here): remote daemons end with mpirun, as they lose their lifeline.
    # plm_ssh_no_tree_spawn: every daemon is started from here, the hosts need not reach each other by SSH
    intent = Intent(ranks=len(order), hostfile=path, map_by="slot" if placement == "block" else "node",
                    bind=notes["bind"], oversubscribe=notes["oversubscribed"], prefix=prefix,
                    ssh_args=" ".join(ssh_args), prte={"plm_ssh_no_tree_spawn": "1"}, subnet=subnet, mca=mpi_mca)
    expected, labels = [], []
    for i in order:
        host = hosts[i]
        expected.append({"address": host.address})
        labels.append({"host": host.name, "vm": host.name, "switch": host.switch, "address": host.address})
    notes.update({"placement": placement, "hosts": len(used), "prefix": prefix,
                  "ranks_per_host": {hosts[i].name: counts[i] for i in used}})
    return LaunchSpec(intent=intent, expected_placement=expected, placement_labels=labels, notes=notes)


def write_hostfile(folder: Path, entries: list[tuple[str, int]]) -> str:
    """An Open MPI hostfile of (address, slots) in ``folder`` (a new one at each call); its path."""
    path = folder / f"hostfile-{len(list(folder.iterdir()))}"
    path.write_text("".join(f"{address} slots={count}\n" for address, count in entries))
    return str(path)
