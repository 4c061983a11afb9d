"""Open MPI's launch agent for emulated VMs: ``python -m vnetbench.topologies.netns.agent [ssh options] HOST COMMAND...``

PRRTE calls it where it would call ssh (``--prtemca plm_ssh_agent``). HOST must be the hostname
of a VM of a vnetbench topology that is up; anything else is refused. The agent puts itself in
the VM's cgroups and on its cpus, enters its network and UTS namespaces and runs COMMAND (the
string PRRTE builds for a remote shell) with /bin/sh, as sshd would. The daemon it starts, and
every rank the daemon forks, inherit all of that: they run inside the VM.

It enters only what vnetbench made for that VM: a namespace with vnetbench's name that is still
the one created (the inode recorded at creation), a UTS namespace inside the topology's state
directory, and vnetbench-named cgroups. A state file that points elsewhere, or a namespace that
someone created again under the same name, is refused before anything is joined.
"""

import os
import re
import shutil
import sys

from ..thishost import state
from ..thishost.cgroups import KINDS as CGROUP_KINDS

# ssh options that take a value; every other option is a flag (-x, -T, -q, ...)
_SSH_VALUE_OPTIONS = set("BbcDEeFIiJLlmOopQRSWw")
REFUSED = 255  # what ssh exits with when it cannot reach a host
BACKEND = "netns"  # the backend whose VMs this agent enters
NETNS_DIR = "/run/netns"
CGROUP_DIR = "/sys/fs/cgroup"


class Refused(Exception):
    """Why the agent will not enter a VM (one line)."""


def parse(argv: list[str]) -> tuple[str, str]:
    """(host, remote command) from an ssh-like command line; ValueError when there is none."""
    i = 0
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "--":
        option = argv[i]
        i += 1
        if len(option) == 2 and option[1] in _SSH_VALUE_OPTIONS:
            i += 1
    if i < len(argv) and argv[i] == "--":
        i += 1
    if i >= len(argv):
        raise ValueError("no host given")
    host, command = argv[i], " ".join(argv[i + 1:])
    if "@" in host:
        host = host.split("@", 1)[1]
    if not command.strip():
        raise ValueError(f"no command given for {host}")
    return host, command


def check(st: dict, vm: dict) -> None:
    """Refused unless the VM's namespaces and cgroups are the ones vnetbench made for it."""
    tid, topology = st.get("id"), st.get("name")
    where = f"VM {vm.get('name')!r} of topology {topology!r}"
    if st.get("backend", BACKEND) != BACKEND:  # states from before they named their backend are this one's
        raise Refused(f"{where}: its topology is the {st.get('backend')!r} backend's, whose VMs this agent "
                      f"does not enter")
    if not isinstance(tid, str) or not state.ID.fullmatch(tid):
        raise Refused(f"{where}: its state has no valid topology id ({tid!r})")
    ours = re.compile(f"vnb-{tid}-{state.VM_LABEL}")
    netns = vm.get("netns")
    if not isinstance(netns, str) or not ours.fullmatch(netns):
        raise Refused(f"{where}: {netns!r} is not the name of a namespace of this topology (vnb-{tid}-VM)")
    inodes = st.get("netns_inodes")
    if not isinstance(inodes, dict):
        raise Refused(f"topology {topology!r} was brought up by an earlier vnetbench that did not record its "
                      f"namespaces; take it down and bring it up again (vnetbench topology down {topology})")
    recorded = inodes.get(netns)
    if not isinstance(recorded, int):
        raise Refused(f"{where}: namespace {netns!r} was not created with the topology (no inode recorded)")
    path = os.path.join(NETNS_DIR, netns)
    nsfs = os.stat("/proc/self/ns/net").st_dev
    try:
        found = os.stat(path)
    except OSError as exc:
        raise Refused(f"{where}: {path}: {exc.strerror}") from None
    # this tells namespaces apart while both exist; the kernel does reuse the number of one that is
    # gone, so a namespace removed and made again after the old one was freed may pass
    if found.st_dev != nsfs or found.st_ino != recorded:
        raise Refused(f"{where}: {path} is not the namespace vnetbench created (inode {found.st_ino}, "
                      f"created as {recorded}): it was replaced; take the topology down")
    folder = _real(state.directory(tid))
    uts = vm.get("uts")
    real = _real(uts)
    if not real.startswith(folder + os.sep):
        raise Refused(f"{where}: its UTS namespace {uts!r} is outside the topology's state directory {folder}")
    try:
        is_namespace = os.stat(real).st_dev == nsfs
    except OSError:
        is_namespace = False
    if not is_namespace:
        raise Refused(f"{where}: {uts!r} is not a UTS namespace (not mounted)")
    for kind in CGROUP_KINDS:
        cgroup = ((st.get("cgroups") or {}).get(kind) or {}).get(vm.get("name"))
        if not cgroup:
            continue
        real = _real(cgroup)
        if not (real.startswith(CGROUP_DIR + os.sep) and ours.fullmatch(os.path.basename(real))):
            raise Refused(f"{where}: its {kind} cgroup {cgroup!r} is not a vnetbench cgroup "
                          f"({CGROUP_DIR}/.../vnb-{tid}-VM)")


def _real(path) -> str:
    """The path with symlinks and '..' resolved; '' when it is no path or cannot be resolved."""
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        return ""
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return ""


def enter(vm: dict, cgroups: dict) -> None:
    """Put this process into the VM's cgroups and onto its cpus (inherited by what it runs)."""
    # on cgroup v2 every kind names the VM's one group: joined once
    for folder in dict.fromkeys(cgroups.get(kind, {}).get(vm["name"]) for kind in CGROUP_KINDS):
        if folder:
            with open(os.path.join(folder, "cgroup.procs"), "w") as handle:
                handle.write(str(os.getpid()))
    os.sched_setaffinity(0, vm["cpus"])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        host, command = parse(argv)
    except ValueError as exc:
        print(f"vnetbench agent: {exc}; usage: python -m vnetbench.topologies.netns.agent HOST COMMAND...",
              file=sys.stderr)
        return REFUSED
    try:
        found = state.find_vm(host)
    except (KeyError, TypeError, AttributeError):  # a state file that is not vnetbench's shape
        found = None
    if found is None:
        print(f"vnetbench agent: {host!r} is not a VM of a vnetbench topology that is up; refused",
              file=sys.stderr)
        return REFUSED
    st, vm = found
    try:
        check(st, vm)
    except Refused as exc:
        print(f"vnetbench agent: {str(exc).replace(chr(10), ' ')}; refused", file=sys.stderr)
        return REFUSED
    nsenter = shutil.which("nsenter")
    if nsenter is None:
        print("vnetbench agent: nsenter not found (util-linux)", file=sys.stderr)
        return REFUSED
    try:
        enter(vm, st.get("cgroups", {}))
    except OSError as exc:
        print(f"vnetbench agent: cannot enter VM {vm['name']} of {st['name']}: {exc}", file=sys.stderr)
        return REFUSED
    sys.stdout.flush()
    os.execv(nsenter, [nsenter, f"--net={os.path.join(NETNS_DIR, vm['netns'])}", f"--uts={vm['uts']}",
                       "/bin/sh", "-c", command])
    return REFUSED  # not reached


if __name__ == "__main__":
    sys.exit(main())
