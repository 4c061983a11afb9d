"""Open vSwitch: the switch of OpenStack, oVirt and most KVM clouds; an OVS bridge per switch, the VMs' links its ports.

Which OVS: where an ovs-vswitchd runs and ``ovs-vsctl`` reaches its database (the host's, e.g. started by
systemd), vnetbench adds its own bridges (``vnbIDs<n>``) and ports to it and removes only those. Where none
runs, vnetbench starts its own ovsdb-server and ovs-vswitchd with every file (database, sockets, pid and log
files) in /run/vnetbench/ovs - never systemd, never /etc/openvswitch: started by the first OVS switch a
topology brings up, stopped once the last is removed, found by ``topology cleanup`` after a SIGKILL. All of it
happens under the state lock (lifecycle.py), so bring-ups and teardowns never race over the daemons.

Datapath (``datapath:``): ``system`` is the kernel's (the openvswitch module), ``netdev`` the userspace one
(ovs-vswitchd forwards every packet itself; needs only packet sockets), ``auto`` the kernel's where its module
is loaded, else netdev; the state and the record say which was used. The netdev datapath completes no partial
checksums: the links that send into it (each VM's eth0, the uplink's physical-side end, the head's link) have
transmit checksum offload turned off (ethtool -K ... tx off, which also turns off TSO), so that every packet
reaches it whole; every port keeps the kernel's 1500-byte MTU. The uplink stays a veth pair whose ends are
kernel devices, so its tbf shapes it on every datapath.
"""

import functools
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

from vnetbench.core import procs
from vnetbench.core.errors import LaunchError, UsageError

from ..thishost import linux, state
from . import KINDS, Driver

RUN = state.RUN_DIR / "ovs"  # vnetbench's own daemons' folder (not a topology's: no 4-hex name)
OWN_DB = f"unix:{RUN}/db.sock"
SYSTEM_RUN = Path("/var/run/openvswitch")  # where Debian's ovs-ctl (and ovs-vsctl's default) keep them
SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")
TOOLS = {"ovs-vsctl": "openvswitch-switch", "ovsdb-tool": "openvswitch-switch", "ovsdb-server": "openvswitch-switch",
         "ovs-vswitchd": "openvswitch-switch", "ethtool": "ethtool"}
MARK = "vnetbench"  # external_ids:vnetbench=ID on each bridge vnetbench makes: what cleanup may remove
DATAPATH_TAP = "ovs-netdev"  # the userspace datapath's own port, made by ovs-vswitchd
BRIDGE = re.compile(r"vnb([0-9a-f]{4})s\d{1,3}")
STOP_WAIT = 5.0


# ---- what this host has ---------------------------------------------------------------------------

@functools.cache
def kernel_datapath() -> bool:
    """Is the kernel's OVS datapath there (the generic netlink family ovs_datapath, i.e. the module loaded)?"""
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 16)  # NETLINK_GENERIC
    except OSError:
        return False
    with sock:
        name = b"ovs_datapath\0"
        attr = struct.pack("HH", 4 + len(name), 2) + name  # CTRL_ATTR_FAMILY_NAME
        attr += b"\0" * (-len(attr) % 4)
        body = struct.pack("BBH", 3, 1, 0) + attr  # CTRL_CMD_GETFAMILY, version 1
        sock.settimeout(5)
        try:
            sock.sendto(struct.pack("IHHII", 16 + len(body), 0x10, 1, 1, 0) + body, (0, 0))  # GENL_ID_CTRL
            reply = sock.recv(65536)
        except OSError:
            return False
    kind = struct.unpack_from("IH", reply)[1]
    return kind != 2 or struct.unpack_from("i", reply, 16)[0] == 0  # NLMSG_ERROR with an error: no such family


def datapath(asked: str | None) -> str:
    return "system" if asked == "system" or asked in (None, "auto") and kernel_datapath() else "netdev"


def missing_tools() -> list[str]:
    return [f"{tool} ({package})" for tool, package in TOOLS.items() if not shutil.which(tool)]


def _pid(pidfile: Path, comm: str) -> int | None:
    """The pid in ``pidfile`` when that process runs and is ``comm`` (never another process reusing the pid); a
    killed daemon that is not reaped yet (a zombie: its parent, once it detached, is whatever reaps orphans here)
    runs no more."""
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _running(pid, comm) else None


def own_running() -> bool:
    return _pid(RUN / "ovsdb-server.pid", "ovsdb-server") is not None


def _running(pid: int, comm: str) -> bool:
    fields = procs.stat_fields(pid)
    return linux.command_name(pid) == comm and bool(fields) and fields[0] != "Z"


def _vswitchds() -> list[int]:
    """The ovs-vswitchd processes of this network namespace: one in another (a container's, a sandbox's, its own
    database and ports there) is not this host's switch, and says nothing of the OVS vnetbench may use here."""
    here = _netns(os.getpid())
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit() and _running(int(entry), "ovs-vswitchd")
            and _netns(int(entry)) == here]


def _netns(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def vsctl(db: str | None, *args: str, wait: bool = True, check: bool = True, timeout: int = 10):
    argv = ["ovs-vsctl", *([f"--db={db}"] if db else []), f"--timeout={timeout}", *([] if wait else ["--no-wait"]),
            *args]
    return linux.run(argv, timeout=timeout + 5, check=check)


def system_answers() -> bool:
    """Does ovs-vsctl reach the host's own database (its default socket)?"""
    return (SYSTEM_RUN / "db.sock").exists() and vsctl(None, "list-br", check=False, timeout=3).returncode == 0


def instances() -> list[tuple[str | None, bool]]:
    """The OVS databases vnetbench may have bridges in that answer: (db, started by vnetbench)."""
    found = [(OWN_DB, True)] if own_running() else []
    return found + ([(None, False)] if shutil.which("ovs-vsctl") and system_answers() else [])


def bridges(db: str | None) -> list[str]:
    done = vsctl(db, "list-br", check=False, timeout=5)
    return done.stdout.split() if done.returncode == 0 else []


def ours(db: str | None, bridge: str) -> bool:
    """Did vnetbench make this bridge (its mark, external_ids:vnetbench, says the topology's id)?"""
    done = vsctl(db, "--if-exists", "get", "bridge", bridge, f"external_ids:{MARK}", check=False, timeout=5)
    found = BRIDGE.fullmatch(bridge)
    return done.returncode == 0 and bool(found) and done.stdout.strip().strip('"') == found.group(1)


def version(db: str | None) -> str | None:
    """The OVS version its database says (where ovs-ctl set it), else ovs-vswitchd's own."""
    done = vsctl(db, "get", "Open_vSwitch", ".", "ovs_version", check=False, timeout=5)
    said = done.stdout.strip().strip('"') if done.returncode == 0 else ""
    if said and said != "[]":
        return said
    found = re.search(r"\d+\.\d+\.\d+\S*", linux.run(["ovs-vswitchd", "--version"], check=False).stdout)
    return found.group(0) if found else None


# ---- vnetbench's own daemons ------------------------------------------------------------------------

def _start(argv: list[str]) -> None:
    env = {**os.environ, "OVS_RUNDIR": str(RUN), "OVS_LOGDIR": str(RUN), "OVS_DBDIR": str(RUN),
           "OVS_SYSCONFDIR": str(RUN)}
    # a detached daemon keeps no pipe of ours open: its output goes to a file
    with open(RUN / "start.err", "w") as err:
        done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=err, stderr=err, timeout=60,
                              start_new_session=True)
    if done.returncode != 0:
        raise LaunchError(f"{argv[0]} did not start (exit {done.returncode}): "
                          f"{(RUN / 'start.err').read_text().strip()[-300:]}")


def start_own() -> None:
    """ovsdb-server and ovs-vswitchd with all their files in RUN (the kernel datapath disabled without it)."""
    RUN.mkdir(parents=True, exist_ok=True, mode=0o755)
    if DATAPATH_TAP not in linux.links():
        (RUN / "made-ovs-netdev").touch()  # the netdev datapath's own tap, which a killed ovs-vswitchd leaves
    db = RUN / "conf.db"
    if not db.exists():
        _start(["ovsdb-tool", "create", str(db), str(SCHEMA)])
    _start(["ovsdb-server", str(db), f"--remote=punix:{RUN}/db.sock", f"--pidfile={RUN}/ovsdb-server.pid",
            f"--unixctl={RUN}/ovsdb-server.ctl", f"--log-file={RUN}/ovsdb-server.log", "--detach"])
    vsctl(OWN_DB, "init", wait=False)
    start_vswitchd()


def start_vswitchd() -> None:
    _start(["ovs-vswitchd", OWN_DB, f"--pidfile={RUN}/ovs-vswitchd.pid", f"--unixctl={RUN}/ovs-vswitchd.ctl",
            f"--log-file={RUN}/ovs-vswitchd.log", "--detach", *([] if kernel_datapath() else ["--disable-system"])])


def stop_own() -> list[str]:
    """End vnetbench's own daemons (SIGTERM, then SIGKILL) and remove their folder; phrases of what went."""
    stopped = []
    for name in ("ovs-vswitchd", "ovsdb-server"):
        pid = _pid(RUN / f"{name}.pid", name)
        if pid is None:
            continue
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_WAIT
        while _pid(RUN / f"{name}.pid", name) == pid and time.monotonic() < deadline:
            time.sleep(0.05)
        if _pid(RUN / f"{name}.pid", name) == pid:
            os.kill(pid, signal.SIGKILL)
        stopped.append(f"{name} (pid {pid}, started by vnetbench)")
    # a tap ours made, when no other ovs-vswitchd (the host's) runs that could be using it
    if (RUN / "made-ovs-netdev").exists() and DATAPATH_TAP in linux.links() and not _vswitchds():
        linux.run(["ip", "link", "del", DATAPATH_TAP], check=False)
        stopped.append(f"interface {DATAPATH_TAP} (its datapath's, left by a killed ovs-vswitchd)")
    shutil.rmtree(RUN, ignore_errors=True)
    return stopped


def choose() -> tuple[str | None, bool]:
    """The OVS to add bridges to: vnetbench's own if it runs, else the host's if it runs and answers, else
    vnetbench's own, started now. (db, started by vnetbench)."""
    if own_running():
        if _pid(RUN / "ovs-vswitchd.pid", "ovs-vswitchd") is None:
            start_vswitchd()  # killed while another topology kept the database: it comes back with their bridges
        return OWN_DB, True
    if _pid(SYSTEM_RUN / "ovs-vswitchd.pid", "ovs-vswitchd") and system_answers():
        return None, False
    start_own()
    return OWN_DB, True


def _vswitchd_problem() -> str | None:
    pidfile = RUN / "ovs-vswitchd.pid" if own_running() else SYSTEM_RUN / "ovs-vswitchd.pid"
    if _pid(pidfile, "ovs-vswitchd") is None:
        try:
            pid = pidfile.read_text().strip()
        except OSError:
            pid = "?"
        return f"ovs-vswitchd (pid {pid}) is gone"
    return None


def _ethtool_tx_off(dev: str, netns: str | None = None) -> None:
    enter = ["nsenter", f"--net=/run/netns/{netns}"] if netns else []
    linux.run([*enter, "ethtool", "-K", dev, "tx", "off"])


@KINDS.register("ovs")
class OVS(Driver):
    datapath_default = "auto"  # the kernel's where its openvswitch module is loaded, else the userspace one

    @classmethod
    def require(cls, topology, index):
        sw = topology.switches[index]
        where = f"switches[{index}] ({sw.name})"
        missing = missing_tools()
        if missing:
            raise UsageError(f"{where}: kind ovs needs {', '.join(missing)}; install them "
                             f"(apt-get install openvswitch-switch ethtool) or use kind bridge")
        if sw.datapath == "system" and not kernel_datapath():
            raise UsageError(f"{where}: datapath system needs the kernel's openvswitch module, which this kernel "
                             f"lacks; use datapath netdev (or auto)")
        others = [pid for pid in _vswitchds() if pid != _pid(RUN / "ovs-vswitchd.pid", "ovs-vswitchd")]
        if others and not own_running() and not system_answers():
            raise UsageError(f"{where}: an ovs-vswitchd runs (pid {others[0]}) but ovs-vsctl cannot reach its "
                             f"database ({SYSTEM_RUN}/db.sock); start its ovsdb-server, or stop that OVS")
        name = f"vnb{topology.id}s{index}"
        for db, own in instances():
            # one of vnetbench's (marked) is a crashed run's, replaced at bring-up; any other is the user's
            if name in bridges(db) and not ours(db, name):
                raise UsageError(f"{where}: the Open vSwitch bridge {name} already exists in "
                                 f"{'vnetbench' if own else 'the host'}'s OVS and vnetbench did not make it: "
                                 f"remove it (ovs-vsctl del-br {name}) or rename the topology")

    @classmethod
    def abilities(cls):
        missing = missing_tools()
        if missing:
            return f"not available: needs {', '.join(missing)}"
        dp = "system (kernel module loaded) and netdev" if kernel_datapath() else \
            "netdev only (userspace; this kernel has no openvswitch module)"
        daemons = "vnetbench's own daemons, running" if own_running() else \
            "the host's daemons" if system_answers() else "vnetbench's own daemons, started with the first OVS switch"
        return f"datapaths: {dp}; {daemons}"

    @classmethod
    def uplink_lines(cls, sw, physical):
        if not sw.uplink:
            return []
        inner, outer = sw.uplink
        return [f"link add {inner} type veth peer name {outer}", f"link set dev {inner} up",
                f"link set dev {outer} master {physical} up"]

    @classmethod
    def vm_link_lines(cls, sw, link, netns):
        return [f"link add {link} type veth peer name eth0 netns {netns}", f"link set dev {link} up"]

    @classmethod
    def tap_lines(cls, sw, tap, mac):
        return [f"tuntap add dev {tap} mode tap", f"link set dev {tap} up"]

    @classmethod
    def nic_options(cls, sw):
        # a guest's NIC sends whole packets into the userspace datapath (its taps carry partial checksums else)
        return ",csum=off" if datapath(sw.datapath) == "netdev" else ""

    @classmethod
    def head_lines(cls, sw, head):
        peer = head[:-1] + "g"
        return [f"link add {head} type veth peer name {peer}", f"link set dev {peer} up", f"link set dev {head} up"]

    @classmethod
    def start(cls, sw, ports, netns, head):
        db, ours = choose()
        used = datapath(sw.datapath)
        # a bridge of this name left by a crashed run (marked as vnetbench's: require refused any other) goes first
        args = ["--if-exists", "del-br", sw.bridge, "--", "add-br", sw.bridge, "--", "set", "bridge", sw.bridge,
                f"datapath_type={used}", f"external_ids:{MARK}={BRIDGE.fullmatch(sw.bridge).group(1)}"]
        for port in ports + ([head[:-1] + "g"] if head else []):
            args += ["--", "add-port", sw.bridge, port]
        vsctl(db, *args, timeout=30)
        if used == "netdev":
            # what sends into the userspace datapath sends whole packets: it completes no partial checksums
            for space in netns:
                _ethtool_tx_off("eth0", space)
            for dev in ([sw.uplink[1]] if sw.uplink else []) + ([head] if head else []):
                _ethtool_tx_off(dev)
        return {"datapath": used, "ovs_version": version(db), "daemons_started_by_vnetbench": ours,
                "db": db or "the host's (ovs-vsctl's default)"}

    @classmethod
    def health(cls, sw):
        gone = _vswitchd_problem()
        if gone:
            return f"Open vSwitch bridge {sw.bridge} lost its daemon: {gone}"
        return None

    @classmethod
    def describe(cls, sw, facts):
        return {"kind": cls.kind, "bridge": sw.bridge, "datapath": facts.get("datapath"),
                "datapath_asked": sw.datapath, "ovs_version": facts.get("ovs_version"),
                "daemons_started_by_vnetbench": facts.get("daemons_started_by_vnetbench")}

    @classmethod
    def remove(cls, sw, present):
        for db, _ in instances():
            if sw.bridge in bridges(db) and ours(db, sw.bridge):
                # waiting for ovs-vswitchd only while it runs: the bridge's internal port is then gone on return
                vsctl(db, "--if-exists", "del-br", sw.bridge, wait=_vswitchd_problem() is None, timeout=30)
        present = linux.links()
        return [f"link del {name}" for name in sw.uplink or () if name in present] + \
            ([f"link del {sw.bridge}"] if sw.bridge in present else [])

    @classmethod
    def leftovers(cls, sw, present):
        left = [name for name in cls.names(sw) if name in present]
        return left + [f"Open vSwitch bridge {sw.bridge}" for db, _ in instances()
                       if sw.bridge in bridges(db) and ours(db, sw.bridge)]

    @classmethod
    def orphans(cls, known_ids):
        removed = []
        for db, own in instances():
            for name in bridges(db):
                found = BRIDGE.fullmatch(name)
                if found and found.group(1) not in known_ids and ours(db, name):
                    vsctl(db, "--if-exists", "del-br", name, wait=_vswitchd_problem() is None, timeout=30)
                    removed.append(f"Open vSwitch bridge {name}" + ("" if own else " (in the host's OVS)"))
        if RUN.exists() and not any(BRIDGE.fullmatch(name) for name in (bridges(OWN_DB) if own_running() else [])):
            removed += [f"daemon {what}" for what in stop_own()]
        return removed

    @classmethod
    def released(cls):
        if RUN.exists() and not (own_running() and bridges(OWN_DB)):
            stop_own()
