"""The SSH between mpirun and the guests: per-topology keys, each guest's sshd configuration, the host's view.

Every guest starts the host's own ``/usr/sbin/sshd`` (DESIGN.md, 2026-11-24) with the files of ``guest/`` in the
topology's state directory, which the guests see read-only at the same path: a host key made for this
topology and the one client key allowed in. The client key and ``known_hosts`` (every guest's address with
that host key: the host key is checked, never accepted blindly) stay in ``ssh/``, on the host only. All of it
goes with the state directory when the topology goes.
"""

import subprocess
from pathlib import Path

from vnetbench.core.errors import LaunchError

from ..thishost import state
from .plan import SSH_PORT

# ssh reads no user or system configuration (-F none): mpirun's SSH to the guests is exactly this
CLIENT_OPTIONS = ("-F", "none", "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=yes",
                  "-o", "GlobalKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR")


def folders(topology_id: str) -> tuple[Path, Path]:
    """(what the guests see, what only the host sees)."""
    top = state.directory(topology_id)
    return top / "guest", top / "ssh"


def numba_cache() -> Path:
    """Where the guests keep numba's compiled kernels, shared read-write by every guest of this host and kept
    after them: a guest cannot write beside the host's sources, and compiling a kernel's loops under TCG takes
    tens of seconds (numba keys its cache by the CPU, so guests of other CPU models keep entries of their own)."""
    return state.RUN_DIR / ".cache" / "guest-numba"


def make(topology_id: str, addresses: list[str]) -> None:
    """The keys, each guest's sshd configuration and the host's known_hosts for ``addresses``."""
    shared, private = folders(topology_id)
    shared.mkdir(mode=0o755, parents=True, exist_ok=True)
    private.mkdir(mode=0o700, parents=True, exist_ok=True)
    for path in (shared / "host_key", private / "id"):
        _keygen(path)
    (shared / "authorized_keys").write_text((private / "id.pub").read_text())
    host_key = (shared / "host_key.pub").read_text().split()
    (private / "known_hosts").write_text("".join(f"[{address}]:{SSH_PORT} {host_key[0]} {host_key[1]}\n"
                                                 for address in addresses))
    numba_cache().mkdir(mode=0o700, parents=True, exist_ok=True)
    (shared / "sshd_config").write_text(sshd_config(shared))


def _keygen(path: Path) -> None:
    done = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "vnetbench", "-f", str(path)],
                          capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise LaunchError(f"ssh-keygen could not make {path}: {done.stderr.strip()[:300]}")


def sshd_config(shared: Path) -> str:
    """The guests' sshd: keys only, root only (mpirun runs as root; the guest's root is the host's user in a
    throwaway system), no PAM: the guests' boot script unlocks root's shadow entry in the guest's private
    /etc instead, which spares every connection PAM's session modules (a second per SSH under TCG)."""
    return "\n".join([
        f"Port {SSH_PORT}",
        f"HostKey {shared / 'host_key'}",
        f"AuthorizedKeysFile {shared / 'authorized_keys'}",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",
        "UseDNS no",
        "PrintMotd no",
        "PrintLastLog no",
        "PidFile /run/sshd.pid",
        # what every rank started through this sshd sees in its environment
        f"SetEnv NUMBA_CACHE_DIR={numba_cache()}",
        "",
    ])


def client(topology_id: str) -> list[str]:
    """ssh's options with which mpirun reaches every guest (sshlaunch.ssh_argv)."""
    from ..launch.sshlaunch import ssh_argv

    _, private = folders(topology_id)
    return ssh_argv("root", SSH_PORT, str(private / "id"),
                    (*CLIENT_OPTIONS, "-o", f"UserKnownHostsFile={private / 'known_hosts'}"))
