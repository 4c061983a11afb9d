"""Run inside the guest tier's virtme-ng guest (a cgroup v2 kernel with tc netem): observe, never judge.

``python tests/guest/inside.py OUT`` drives vnetbench through its CLI on the guest and writes what
it saw to OUT/facts.json after every step (so a step that hangs still leaves the earlier ones);
tests/guest/test_guest.py asserts on those facts on the host. Under TCG every command is slow
(tens of seconds for a CLI call), so the steps share one topology: up, look, ping, exec, down,
then one failed run of a preset. Only the standard library is used here.
"""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SPEC = HERE / "confined.yaml"
CGROUP = Path("/sys/fs/cgroup")
RUN_DIR = Path("/run/vnetbench")
OURS = re.compile(r"^vnb")
HOG = 512 << 20  # four times the VMs' 128 MB cap
PINGS = 15

OUT = Path(sys.argv[1])
facts: dict = {"steps": {}}


SAVING = threading.RLock()  # the steps and the watch below both save


def save() -> None:
    with SAVING:
        tmp = OUT / "facts.json.tmp"
        tmp.write_text(json.dumps(facts, indent=1))
        os.replace(tmp, OUT / "facts.json")


def since_boot() -> float:
    return float(Path("/proc/uptime").read_text().split()[0])


# written at once: from here on the guest has booted and runs this file, so a missing step is the tests'
# failure to report, not a guest that could not be had (the host skips only when this file never came)
facts["started_since_boot"] = since_boot()
save()


def processes() -> list[str]:
    """'PID STATE WCHAN COMMAND' of every process but the kernel's: where each one waits."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            if entry.name.isdigit() and cmdline:
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                found.append(f"{entry.name} {state} {(entry / 'wchan').read_text() or '-'} {cmdline[:160]}")
        except OSError:
            continue
    return sorted(found, key=lambda line: int(line.split()[0]))


def watch() -> None:
    """Every 30 s, what runs in the guest and where it waits: a step that never ends (seen twice: the exec's
    topology never came up after 'show') then leaves the host more than its silence."""
    while True:
        time.sleep(30)
        seen = {"since_boot": since_boot(), "seen": processes()}
        with SAVING:  # the steps change facts only outside a save; this thread only inside one
            facts["processes"] = seen
            try:
                save()
            except RuntimeError:  # a step added its facts while this save read them: the next save has them
                pass


threading.Thread(target=watch, daemon=True).start()


def step(name):
    """Run one observation; its exception is a fact too (the host test that needs it says so)."""
    def wrap(fn):
        started = time.monotonic()
        try:
            facts[name] = fn()
            facts["steps"][name] = {"ok": True}
        except Exception as exc:  # noqa: BLE001 - reported to the host, which fails the test
            facts["steps"][name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        facts["steps"][name]["seconds"] = round(time.monotonic() - started, 1)
        facts["steps"][name]["since_boot"] = since_boot()
        save()
        return fn
    return wrap


MPI_AS_ROOT = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def read(path) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def hierarchy() -> dict:
    """Every vnb-named folder anywhere in the cgroup tree, and every subtree_control on the way."""
    found, controls = [], {}
    for folder, dirs, _ in os.walk(CGROUP):
        controls[folder] = read(Path(folder) / "cgroup.subtree_control")
        found += [os.path.join(folder, d) for d in dirs if OURS.match(d)]
        dirs[:] = [d for d in dirs if not OURS.match(d)]
    # .lock and .cache stay by design: the state lock, and the world-size shim an application run builds once
    kept = (".lock", ".cache")
    return {"ours": sorted(found), "subtree_control": controls,
            "run_dir": sorted(n for n in os.listdir(RUN_DIR) if n not in kept) if RUN_DIR.is_dir() else [],
            "namespaces": sorted(n for n in os.listdir("/run/netns") if OURS.match(n))
            if os.path.isdir("/run/netns") else [],
            "links": sorted(n for n in os.listdir("/sys/class/net") if OURS.match(n))}


def state() -> dict:
    for path in RUN_DIR.glob("*/state.json"):
        st = json.loads(path.read_text())
        if st["name"] == "guest-confined":
            return st
    raise RuntimeError("no state for guest-confined under /run/vnetbench")


@step("guest")
def _guest():
    return {"uname": os.uname().release, "booted_in": since_boot(), "cgroup_fs": subprocess.run(["stat", "-fc", "%T", str(CGROUP)],
            capture_output=True, text=True).stdout.strip(), "controllers": read(CGROUP / "cgroup.controllers"),
            "before": hierarchy()}


def start(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "vnetbench", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **MPI_AS_ROOT})


def finish(proc: subprocess.Popen, args, started: float, timeout=300) -> dict:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return {"argv": list(args), "rc": proc.returncode, "stdout": out[-4000:], "stderr": err[-4000:],
            "seconds": round(time.monotonic() - started, 1)}


# each rank: waits until the driver has looked at the topology from outside, then reports where it is
# confined, runs a process beyond the VM's memory cap and reports what the cgroup counted
RANK = f"""
for i in $(seq 1000); do [ -e {OUT}/looked ] && break; sleep 0.2; done
g=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)
before=$(awk '/^oom_kill /{{print $2}}' "$g/memory.events")
{sys.executable} -I -S -c 'b = bytearray({HOG}); print(len(b))' >/dev/null 2>&1; rc=$?
after=$(awk '/^oom_kill /{{print $2}}' "$g/memory.events")
echo "VNBFACT $(hostname) $$ $(sed -n 's/^0:://p' /proc/self/cgroup) \
$(awk '/^Cpus_allowed_list/{{print $2}}' /proc/self/status) $rc $before $after"
"""
EXEC = ("exec", "--topology", str(SPEC), "--ranks", "2", "--timeout", "240", "--record",
        "--store", str(OUT / "store.jsonl"), "--", "sh", str(OUT / "rank.sh"))
SHOW = ("topology", "show", str(SPEC))
(OUT / "rank.sh").write_text(RANK)
FAIL = ("exec", "--topology", "2vm-1vswitch", "--ranks", "2", "--timeout", "240", "--", "sh", "-c", "exit 3")
# CLI calls cost tens of seconds under TCG, so they run at once: one exec brings the topology up,
# runs the ranks and takes it down; while its ranks wait, this script looks at the topology from
# outside; meanwhile a run on another topology fails (and two topologies share the controllers)
# the world-size shim the host built (conftest.py), where vnetbench keeps it once built (its state root's cache)
for built in OUT.glob("cache/worldsize-*.so"):
    (RUN_DIR / ".cache").mkdir(parents=True, exist_ok=True)
    shutil.copy(built, RUN_DIR / ".cache" / built.name)
started = time.monotonic()
running, showing, failing = start(*EXEC), start(*SHOW), start(*FAIL)


@step("show")
def _show():
    return finish(showing, SHOW, started)


@step("confined")
def _confined():
    for _ in range(1200):
        if RUN_DIR.is_dir() and any(json.loads(p.read_text()).get("complete") for p in RUN_DIR.glob("*/state.json")
                                    if '"guest-confined"' in p.read_text()):
            break
        if running.poll() is not None:
            raise RuntimeError(f"exec ended (exit {running.returncode}) before its topology was up")
        time.sleep(0.25)
    st = state()
    vms = {}
    for vm in st["layout"]["vms"]:
        folder = st["cgroups"]["cpuset"][vm["name"]]
        vms[vm["name"]] = {"planned_cpus": vm["cpus"], "planned_mems": vm["mems"], "planned_memory": vm["memory"],
                           "folder": folder, "memory_folder": st["cgroups"]["memory"][vm["name"]],
                           **{name: read(Path(folder) / name) for name in
                              ("cpuset.cpus", "cpuset.mems", "cpuset.cpus.effective", "memory.max",
                               "memory.swap.max")}}
    return {"mode": st.get("cgroup_mode"), "vms": vms, "while_up": hierarchy()}


@step("qdiscs")
def _qdiscs():
    st = state()
    shown = json.loads(subprocess.run(["tc", "-j", "qdisc", "show"], capture_output=True, text=True,
                                      check=True).stdout)
    uplinks = {sw["name"]: sw["uplink"] for sw in st["layout"]["switches"] if sw.get("uplink")}
    return {"uplinks": uplinks, "delay_us": {sw["name"]: sw["delay"] for sw in st["layout"]["switches"]},
            "qdiscs": [{"dev": q["dev"], "kind": q["kind"], "options": q.get("options", {})}
                       for q in shown if OURS.match(q["dev"])]}


@step("failed_run")
def _failed_run():
    return {**finish(failing, FAIL, started), "after": hierarchy()}


def pings(netns: str, head: str, port: int) -> list[float]:
    """Round trips (ms) from inside ``netns`` to head:port, measured in a forked child that joined
    the namespace (setns through libc: Python 3.11 has no os.setns; a new interpreter costs ~10 s)."""
    import ctypes

    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            with open(f"/run/netns/{netns}") as ns:
                if ctypes.CDLL(None, use_errno=True).setns(ns.fileno(), 0x40000000) != 0:  # CLONE_NEWNET
                    os._exit(3)
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.settimeout(5)
            rtts = []
            for i in range(PINGS):
                t = time.perf_counter()
                s.sendto(str(i).encode(), (head, port))
                while s.recv(64) != str(i).encode():
                    pass
                rtts.append((time.perf_counter() - t) * 1000)
            os.write(write_end, " ".join(f"{r:.3f}" for r in rtts).encode())
            os._exit(0)
        except BaseException:
            os._exit(4)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        out = pipe.read()
    _, status = os.waitpid(child, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"the ping-pong from {netns} ended with {os.waitstatus_to_exitcode(status)}")
    return [float(x) for x in out.split()]


def sent_by_qdiscs() -> dict:
    """Packets each of our qdiscs has sent, by 'dev kind'."""
    shown = json.loads(subprocess.run(["tc", "-s", "-j", "qdisc", "show"], capture_output=True, text=True,
                                      check=True).stdout)
    return {f"{q['dev']} {q['kind']}": q.get("packets", 0) for q in shown if OURS.match(q["dev"])}


@step("rtt")
def _rtt():
    """UDP ping-pong from each VM's namespace to the head (on the physical switch), across its uplink."""
    st = state()
    head = st["layout"]["head"]
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind((head, 0))
    server.settimeout(1)
    port, stop = server.getsockname()[1], threading.Event()

    def echo():
        while not stop.is_set():
            try:
                data, peer = server.recvfrom(64)
                server.sendto(data, peer)
            except socket.timeout:
                continue

    thread = threading.Thread(target=echo, daemon=True)
    thread.start()
    rtts = {}
    try:
        for vm in st["layout"]["vms"]:
            before = sent_by_qdiscs()
            ms = pings(vm["netns"], head, port)
            rtts[vm["name"]] = {"switch": vm["switch"], "ms": ms, "route": subprocess.run(
                ["ip", "-o", "route", "get", vm["address"], "from", head], capture_output=True, text=True).stdout,
                "qdisc_packets": {key: n - before.get(key, 0) for key, n in sent_by_qdiscs().items()}}
    finally:
        stop.set()
        thread.join(5)
        server.close()
    return rtts


@step("exec")
def _exec():
    (OUT / "looked").touch()
    ran = finish(running, EXEC, started)
    ranks = []
    for line in ran["stdout"].splitlines():
        if line.startswith("VNBFACT "):
            host, pid, cgroup, cpus, rc, before, after = line.split()[1:]
            ranks.append({"hostname": host, "pid": int(pid), "cgroup": cgroup, "cpus": cpus, "hog_rc": int(rc),
                          "oom_kill_before": int(before), "oom_kill_after": int(after)})
    store = OUT / "store.jsonl"
    records = [json.loads(line) for line in store.read_text().splitlines()] if store.exists() else []
    last = records[-1] if records else {}
    return {**ran, "ranks": ranks, "record": {k: last.get(k) for k in ("status", "topology", "launch")},
            "after": hierarchy()}



facts["done"] = True
save()
