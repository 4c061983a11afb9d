"""What a guest really got, read from its QEMU once it is up: vhost or not, where each of its threads runs, where its
memory landed and on what pages. The record says these, not what was asked for.

- vhost: QEMU prints "falling back on userspace virtio" (or a vhost error) and carries on when vhost-net does not
  start; a guest that uses it has a vhost worker named ``vhost-<QEMU's pid>`` - a kernel thread before Linux 6.4
  (Debian 12, Ubuntu 22.04), a thread of QEMU itself since.
- threads: vCPU threads are pinned one to a cpu of the VM's (guests._pinned, QMP query-cpus-fast). Every other
  thread of QEMU (its main loop: tap I/O without vhost, 9p; its workers) and of the guest's virtiofsd runs on
  the VM's own cpus, EMULATOR_CPUS: spare host cpus are none on a host the VMs fill (this 2-core one), other VMs'
  cpus would make one VM's I/O another's noise, and a VM's own cpus charge it its own I/O, as the hypervisor the
  study ran did without an emulator pin. The vhost worker goes there too where the kernel lets it (a kthread before
  6.4 has kthreadd's affinity, every host cpu, until placed); what each thread's Cpus_allowed_list then says is
  recorded.
- memory: QEMU's /proc/PID/numa_maps (the guest's RAM: its largest anonymous or memfd mapping) gives the policy
  and the pages on each node, smaps_rollup the huge pages.
"""

import os
from pathlib import Path

from vnetbench.core import procs

from ..thishost.host import format_cpulist
from .probe import vhost_said

EMULATOR_CPUS = "the VM's own cpus"
PROC = Path("/proc")


def _keyed(path: Path) -> dict:
    """A /proc file of "Key: value" lines (status, smaps_rollup) as a dict; {} when it is gone."""
    found = {}
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(":")
            found[key.strip()] = value.strip()
    except OSError:
        pass
    return found


def _status(task: Path) -> dict:
    return _keyed(task / "status")


def threads(pid: int) -> dict[int, dict]:
    """thread id -> its name and the cpus it may run on, for every thread of process ``pid``."""
    found = {}
    for task in (PROC / str(pid) / "task").glob("[0-9]*"):
        status = _status(task)
        if status:
            found[int(task.name)] = {"name": status.get("Name", "?"), "cpus": status.get("Cpus_allowed_list", "?")}
    return found


def vhost_workers(qemu_pid: int) -> list[int]:
    """The vhost worker(s) of ``qemu_pid``: its own threads named vhost-PID (Linux >= 6.4), else kernel threads of
    that name."""
    name = f"vhost-{qemu_pid}"
    own = [tid for tid, seen in threads(qemu_pid).items() if seen["name"] == name]
    if own:
        return own
    found = []
    for entry in PROC.glob("[0-9]*"):
        try:
            if (entry / "comm").read_text().strip() == name:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _place(tid: int, cpus: set[int]) -> str | None:
    try:
        os.sched_setaffinity(tid, cpus)
        return None
    except OSError as exc:
        return exc.strerror


def virtiofsd(marker_env: str, marker: str) -> list[int]:
    """The guest's virtiofsd processes (started by virtme-run, so carrying the guest's marker)."""
    from ..thishost.linux import command_name

    return [pid for pid, value in procs.marked(marker_env, Path(marker).parent).items()
            if value == marker and "virtiofsd" in (command_name(pid) or "")]


def place(qemu_pid: int, vcpu_threads: set[int], cpus: tuple[int, ...], helpers: list[int]) -> dict:
    """Put every thread of QEMU but its vCPUs, the vhost worker and ``helpers``' threads (virtiofsd) on ``cpus``;
    what each then may run on (read back from /proc), and any that could not be placed, with why."""
    want, refused = set(cpus), {}
    emulator = [tid for tid, seen in threads(qemu_pid).items() if tid not in vcpu_threads
                and not seen["name"].startswith("vhost-")]
    for tid in emulator:
        why = _place(tid, want)
        if why and (PROC / str(qemu_pid) / "task" / str(tid)).exists():
            refused[str(tid)] = why
    workers = vhost_workers(qemu_pid)
    for tid in workers:
        why = _place(tid, want)
        if why:
            refused[f"vhost {tid}"] = why
    helper_threads = [tid for pid in helpers for tid in threads(pid)]
    for tid in helper_threads:
        _place(tid, want)
    now = threads(qemu_pid)
    return {"declared": f"{EMULATOR_CPUS}: {format_cpulist(cpus)}",
            "emulator": _where(now, [tid for tid in now if tid not in vcpu_threads and tid not in workers]),
            "vhost_worker": _where({tid: {"cpus": _status(PROC / str(tid)).get("Cpus_allowed_list", "?")}
                                    for tid in workers}, workers) if workers else None,
            "virtiofsd": _where({tid: seen for pid in helpers for tid, seen in threads(pid).items()},
                                helper_threads) if helpers else None,
            "vcpus": _where(now, sorted(vcpu_threads & set(now))),
            **({"not_placed": refused} if refused else {})}


def _where(seen: dict[int, dict], tids) -> dict:
    """How many threads, and the cpus they may run on (each distinct list once)."""
    lists = sorted({seen[tid]["cpus"] for tid in tids if tid in seen})
    return {"threads": len([tid for tid in tids if tid in seen]), "cpus": lists[0] if len(lists) == 1 else lists}


def vhost(asked: bool, console: str, qemu_pid: int) -> str:
    """What the guest's NIC uses: "vhost-net" (a worker of its QEMU is there), "fell back to userspace (...)" when
    vhost was asked for and QEMU said it could not, "userspace virtio (vhost not asked: ...)" otherwise."""
    said = vhost_said(console)
    if not asked:
        return "userspace virtio (vhost not asked for)"
    if said:
        return f"fell back to userspace ({said})"
    if not vhost_workers(qemu_pid):
        return "fell back to userspace (no vhost worker of its QEMU)"
    return "vhost-net"


def ram_mapping(qemu_pid: int, size: int) -> str | None:
    """The start address (hex, as numa_maps writes it) of the guest's RAM in QEMU: the writable, not executable
    mapping of the guest's memory size (QEMU maps it whole; under TCG a larger rwx mapping is its code buffer)."""
    try:
        lines = (PROC / str(qemu_pid) / "maps").read_text().splitlines()
    except OSError:
        return None
    best = None
    for line in lines:
        span, perms = line.split()[:2]
        low, high = (int(part, 16) for part in span.split("-"))
        if perms.startswith("rw") and "x" not in perms and size <= high - low < size + (64 << 20):
            if best is None or high - low < best[1]:
                best = (f"{low:x}", high - low)
    return best[0] if best else None


def _smaps_of(qemu_pid: int, start: str) -> dict:
    """The /proc/PID/smaps entry of the mapping at ``start`` as a dict ("AnonHugePages": "2048 kB", ...)."""
    found, inside = {}, False
    try:
        lines = (PROC / str(qemu_pid) / "smaps").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        head = line.split(" ", 1)[0]
        if "-" in head and ":" not in head:  # a mapping's first line: "7f5d53e00000-7f5d73e00000 rw-p ..."
            if inside:
                break
            inside = head.split("-")[0] == start
        elif inside:
            key, _, value = line.partition(":")
            found[key.strip()] = value.strip()
    return found


def memory(qemu_pid: int, size: int, mems: tuple[int, ...]) -> dict:
    """Where the guest's RAM is: its mapping's policy, MiB touched on each node, on what pages, and whether every
    page is on the VM's nodes (``as_planned``)."""
    start = ram_mapping(qemu_pid, size)
    if start is None:
        return {"problem": "no mapping of the guest's memory size in its QEMU's maps"}
    try:
        lines = (PROC / str(qemu_pid) / "numa_maps").read_text().splitlines()
    except OSError as exc:
        return {"problem": f"no numa_maps ({exc.strerror})"}
    found = next((line.split() for line in lines if line.split()[:1] == [start]), None)
    if found is None:
        return {"problem": f"the guest's memory ({start}) is not in its QEMU's numa_maps"}
    policy, fields = found[1], dict(word.split("=", 1) for word in found[2:] if "=" in word)
    page_kb = int(fields.get("kernelpagesize_kB", "4"))
    by_node = {key[1:]: round(int(value) * page_kb / 1024, 1) for key, value in fields.items()
               if key[:1] == "N" and key[1:].isdigit()}
    smaps = _smaps_of(qemu_pid, start)
    huge_kb = sum(int(smaps.get(key, "0 kB").split()[0]) for key in ("AnonHugePages", "ShmemPmdMapped"))
    return {"policy": policy, "backing": "memfd" if "memfd:" in fields.get("file", "") else "anonymous",
            "mib_by_node": by_node, "huge_pages_mib": round(huge_kb / 1024, 1),
            "thp_eligible": smaps.get("THPeligible") == "1",
            "as_planned": all(int(node) in mems for node in by_node)}


def settle(vm, guest: dict, qemu_pid: int, vcpu_threads: set[int], console: str, marker_env: str,
           marker: str) -> dict:
    """Once ``vm``'s guest is up: its helpers placed, and what it got (vhost, threads, memory)."""
    helpers = virtiofsd(marker_env, marker) if guest.get("rootfs") == "virtiofs" else []
    return {"vhost": vhost(bool(guest.get("vhost")), console, qemu_pid),
            "threads": place(qemu_pid, vcpu_threads, vm.cpus, helpers),
            "memory": memory(qemu_pid, vm.memory, vm.mems)}
