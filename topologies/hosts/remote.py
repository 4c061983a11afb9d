"""The hosts over SSH with Fabric: can they run vnetbench together, what are they, what records do they hold.

- ``check(topology)``: per host, reachable over SSH, the same vnetbench, Open MPI and Python at
  the same path as the others, SSH to every other host, clock offset, free memory and cores;
- ``facts(topology)``: CPU model, cores, NUMA layout, NICs and their speeds, per host;
- ``fetch(topology, remote_path, add)``: the records in a file on the hosts, each handed to ``add``.

Every host is reached in parallel (a Fabric ThreadingGroup), and every remote command has a
timeout. Host keys are checked as ssh would check them for mpirun: against ~/.ssh/known_hosts
and any UserKnownHostsFile in the SSH options, unless StrictHostKeyChecking=no.
"""

import inspect
import json
import shlex
import sys
import time
from pathlib import Path

from ..base import HostReport
from ..launch.hostcheck import compare as _compare
from ..launch.hostcheck import probe as _probe
from ..launch.hostcheck import read_probe

DEFAULT_TIMEOUT = 20.0
CLOCK_TOLERANCE = 2.0


def _facts(spec):
    import glob, os, platform, socket  # noqa: E401

    def read(path, default=None):
        try:
            with open(path) as handle:
                return handle.read().strip()
        except OSError:
            return default

    model = next((line.split(":", 1)[1].strip() for line in (read("/proc/cpuinfo", "") or "").splitlines()
                  if line.startswith("model name")), platform.processor() or None)
    packages, cores = set(), set()
    for cpu in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/topology"):
        package, core = read(f"{cpu}/physical_package_id"), read(f"{cpu}/core_id")
        packages.add(package)
        cores.add((package, core))
    numa = {}
    for node in sorted(glob.glob("/sys/devices/system/node/node[0-9]*")):
        total = next((int(line.split()[3]) * 1024 for line in (read(f"{node}/meminfo", "") or "").splitlines()
                      if "MemTotal" in line), None)
        numa[os.path.basename(node)] = {"cpus": read(f"{node}/cpulist"), "memory": total}
    nics = {}
    for path in sorted(glob.glob("/sys/class/net/*")):
        name = os.path.basename(path)
        speed = read(f"{path}/speed")
        driver = os.path.realpath(f"{path}/device/driver") if os.path.exists(f"{path}/device/driver") else None
        nics[name] = {"state": read(f"{path}/operstate"), "mtu": int(read(f"{path}/mtu", "0") or 0),
                      "mac": read(f"{path}/address"),
                      "speed_mbps": int(speed) if speed and speed.lstrip("-").isdigit() and int(speed) > 0 else None,
                      "driver": os.path.basename(driver) if driver else None,
                      "virtual": os.path.realpath(path).startswith("/sys/devices/virtual/")}
    return {"hostname": socket.gethostname(), "cpu_model": model, "logical_cpus": os.cpu_count(),
            "physical_cores": len(cores) or None, "sockets": len(packages) or None, "numa": numa, "nics": nics,
            "kernel": platform.release(), "machine": platform.machine()}


def _remote(function, venv: str, spec: dict) -> str:
    """The shell command that runs ``function(spec)`` with the hosts' venv Python and prints JSON."""
    source = f"{inspect.getsource(function)}\nimport json, sys\nprint(json.dumps({function.__name__}(json.loads(sys.argv[1]))))"
    return shlex.join([f"{venv}/bin/python", "-c", source, json.dumps(spec)])


# ---- the controller's side -----------------------------------------------------------------

def connections(topology, timeout: float) -> list[tuple[str, object]]:
    """(host name, Fabric Connection) per host, with the host's user, port, key and host-key checking."""
    from fabric import Config, Connection

    out = []
    for host in topology.hosts:
        config = Config(overrides={"run": {"hide": True, "warn": True, "in_stream": False}})
        kwargs = {"key_filename": [host.ssh.identity]} if host.ssh.identity else {}
        cxn = Connection(host.address, user=host.ssh.user, port=host.ssh.port, config=config,
                         connect_timeout=max(1, int(timeout)), connect_kwargs=kwargs)
        _host_key_checking(cxn.client, _ssh_options(host.ssh.options))
        out.append((host.name, cxn))
    return out


def _ssh_options(args: tuple[str, ...]) -> dict[str, str]:
    """The ``-o Key=Value`` options among ssh arguments, keys lower-cased (as ssh compares them)."""
    found = {}
    for i, word in enumerate(args):
        if word == "-o" and i + 1 < len(args):
            text = args[i + 1]
        elif word.startswith("-o") and len(word) > 2:
            text = word[2:]
        else:
            continue
        key, sep, value = text.partition("=")
        if sep:
            found[key.strip().lower()] = value.strip()
    return found


def _host_key_checking(client, options: dict) -> None:
    import paramiko

    client.load_system_host_keys()
    for path in options.get("userknownhostsfile", "").split():
        if Path(path).expanduser().is_file():
            client.load_host_keys(str(Path(path).expanduser()))
    strict = options.get("stricthostkeychecking", "ask").lower()
    policy = paramiko.WarningPolicy() if strict in ("no", "off", "accept-new") else paramiko.RejectPolicy()
    client.set_missing_host_key_policy(policy)


def _group_run(named: list[tuple[str, object]], command: str, timeout: float) -> dict:
    """host name -> Result or exception, running ``command`` on every connection of ``named`` at once."""
    from fabric import ThreadingGroup
    from fabric.exceptions import GroupException

    if not named:
        return {}
    try:
        results = ThreadingGroup.from_connections([cxn for _, cxn in named]).run(command, timeout=timeout)
    except GroupException as exc:
        results = exc.result
    return {name: results.get(cxn) for name, cxn in named}


def _close(named: list[tuple[str, object]]) -> None:
    for _, cxn in named:
        cxn.close()


def why(exc: BaseException, timeout: float | None = None) -> str:
    """A failed SSH connection or command, in a few words."""
    import socket

    import paramiko
    from invoke.exceptions import CommandTimedOut

    if isinstance(exc, CommandTimedOut):
        return f"command timed out after {exc.timeout:g} s"
    if isinstance(exc, paramiko.BadHostKeyException):
        return "host key differs from known_hosts (possible impostor; remove the stale key)"
    if isinstance(exc, paramiko.AuthenticationException):
        return "authentication failed (no key it accepts)"
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        errors = {getattr(e, "errno", None) for e in exc.errors.values()}
        return "connection refused (no sshd listening)" if 111 in errors else str(exc)
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return f"no answer in {timeout:g} s" if timeout else "no answer (timed out)"
    if isinstance(exc, paramiko.SSHException) and "known_hosts" in str(exc):
        return "host key not in known_hosts (ssh-keyscan it, or let the vnetbench_ssh role add it)"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return f"{type(exc).__name__}: {exc}"


def check(topology, *, venv: str | None = None, timeout: float = DEFAULT_TIMEOUT,
          clock_tolerance: float = CLOCK_TOLERANCE, mpi: str | None = None) -> list[HostReport]:
    """Check every host in parallel; a report per host, in the topology's order (never raises for a host)."""
    venv = venv or topology.venv or sys.prefix
    reports = {host.name: HostReport(host.name, host.address) for host in topology.hosts}
    # the hosts reach each other as mpirun reaches them: with the first host's SSH settings
    peer_ssh = topology.hosts[0].ssh.argv(connect_timeout=max(1, int(timeout / 2)))
    spec = {"timeout": timeout / 2, "ssh": peer_ssh, "peers": [[h.name, h.address] for h in topology.hosts],
            "mpi": mpi}
    named = connections(topology, timeout)
    try:
        results = _group_run(named, _remote(_probe, venv, spec), timeout)
        for name, outcome in results.items():
            read_probe(reports[name], outcome, venv, timeout, why)
        probed = [(name, cxn) for name, cxn in named if reports[name].probe]
        sent = time.time()
        clocks = _group_run(probed, "date +%s.%N", timeout)
        back = time.time()
        for name, outcome in clocks.items():
            report = reports[name]
            report.clock_window = (back - sent) / 2
            try:
                report.clock_offset = float(outcome.stdout.split()[0]) - (sent + back) / 2
            except (AttributeError, IndexError, ValueError):
                report.problems.append("clock: could not read it (date +%s.%N)")
                continue
            if abs(report.clock_offset) > clock_tolerance + report.clock_window:
                report.problems.append(f"clock is {report.clock_offset:+.1f} s off this machine's (tolerance "
                                       f"{clock_tolerance:g} s): run NTP/chrony on every host")
    finally:
        _close(named)
    for report in reports.values():
        # a host nobody reaches is that host's failure, not a failure of every host that tried
        report.problems = [p for p in report.problems if not any(
            p.startswith(f"cannot SSH to {other.name}:") and not other.reached for other in reports.values())]
    _compare(list(reports.values()), venv)
    return list(reports.values())


def facts(topology, *, venv: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> dict[str, dict]:
    """host name -> its facts, or {"error": why} for a host that could not be asked."""
    venv = venv or topology.venv or sys.prefix
    named = connections(topology, timeout)
    found = {}
    try:
        results = _group_run(named, _remote(_facts, venv, {}), timeout)
    finally:
        _close(named)
    for name, cxn in named:
        outcome = results.get(name)
        if outcome is None or isinstance(outcome, BaseException):
            found[name] = {"error": f"SSH: {why(outcome, timeout) if outcome else 'no result'}"}
            continue
        try:
            found[name] = {"address": cxn.host, **json.loads(outcome.stdout.strip().splitlines()[-1])}
        except (IndexError, json.JSONDecodeError):
            tail = outcome.stderr.strip().splitlines()
            found[name] = {"error": f"exit {outcome.exited}: {tail[-1] if tail else 'no output'}"}
    return found


def fetch(topology, remote_path: str, add, *, timeout: float = DEFAULT_TIMEOUT) -> dict[str, dict]:
    """The records of file ``remote_path`` on every host, each that reads as a record handed to ``add(record)``
    (True: new to the store it adds to).

    host name -> {"new": n, "known": n, "bad": n} or {"error": why}; a host without the file
    reports {"missing": True}.
    """
    from vnetbench.core.records import check_record

    named = connections(topology, timeout)
    summary = {}
    try:
        results = _group_run(named, shlex.join(["cat", "--", remote_path]), timeout)
    finally:
        _close(named)
    for name, outcome in results.items():
        if outcome is None or isinstance(outcome, BaseException):
            summary[name] = {"error": f"SSH: {why(outcome, timeout) if outcome else 'no result'}"}
            continue
        if outcome.exited != 0:
            missing = "No such file" in outcome.stderr
            summary[name] = {"missing": True} if missing else {"error": outcome.stderr.strip()[-200:]}
            continue
        counts = {"new": 0, "known": 0, "bad": 0}
        for line in outcome.stdout.splitlines():
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                counts["bad"] += 1
                continue
            if check_record(record):
                counts["bad"] += 1
            else:
                counts["new" if add(record) else "known"] += 1
        summary[name] = counts
    return summary
