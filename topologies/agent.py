"""Open MPI's launch agent for emulated VMs: ``python -m vnetbench.topologies.agent [ssh options] HOST COMMAND...``

PRRTE calls it where it would call ssh (``--prtemca plm_ssh_agent``). HOST must be the hostname
of a VM of a vnetbench topology that is up; anything else is refused. The agent puts itself in
the VM's cgroups and on its cpus, enters its network and UTS namespaces and runs COMMAND (the
string PRRTE builds for a remote shell) with /bin/sh, as sshd would. The daemon it starts, and
every rank the daemon forks, inherit all of that: they run inside the VM.
"""

import os
import shutil
import sys

from . import state

# ssh options that take a value; every other option is a flag (-x, -T, -q, ...)
_SSH_VALUE_OPTIONS = set("BbcDEeFIiJLlmOopQRSWw")
REFUSED = 255  # what ssh exits with when it cannot reach a host


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


def enter(vm: dict, cgroups: dict) -> None:
    """Put this process into the VM's cgroups and onto its cpus (inherited by what it runs)."""
    for kind in ("cpuset", "memory"):
        folder = cgroups.get(kind, {}).get(vm["name"])
        if folder:
            with open(os.path.join(folder, "cgroup.procs"), "w") as handle:
                handle.write(str(os.getpid()))
    os.sched_setaffinity(0, vm["cpus"])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        host, command = parse(argv)
    except ValueError as exc:
        print(f"vnetbench agent: {exc}; usage: python -m vnetbench.topologies.agent HOST COMMAND...",
              file=sys.stderr)
        return REFUSED
    found = state.find_vm(host)
    if found is None:
        print(f"vnetbench agent: {host!r} is not a VM of a vnetbench topology that is up; refused",
              file=sys.stderr)
        return REFUSED
    st, vm = found
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
    os.execv(nsenter, [nsenter, f"--net=/run/netns/{vm['netns']}", f"--uts={vm['uts']}",
                       "/bin/sh", "-c", command])
    return REFUSED  # not reached


if __name__ == "__main__":
    sys.exit(main())
