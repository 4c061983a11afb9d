"""The qemu backend: every VM of a topology a QEMU guest, on the same switches as the emulated VMs.

A VM is a QEMU guest booting a kernel of this host (the running kernel's image, else the newest in /boot, or
``guest.kernel``) with this host's root shared read-only and private /etc, /var, /tmp and /run (virtme-ng),
so that the venv and the user's programs are at the same paths inside; one virtio-net NIC, its tap on the
VM's switch's bridge (vhost=on where /dev/vhost-net opens), found by its MAC inside and given the plan's
address; its vCPUs pinned to the host cpus the plan gives the VM and its other threads on those cpus, its memory
the VM's (bound to or interleaved over its NUMA nodes where the host has several); a q35 machine whatever the
accelerator. The switches are the emulated VMs' (fabric.py: bridges, tbf-shaped and
netem-delayed uplinks to a physical-switch bridge); mpirun runs on the host with the head's address, and
reaches the sshd each guest starts (sshd.py) as the hosts backend reaches hosts (sshlaunch.py), so every
MPI flavour launches into guests as onto hosts. Root, ip, tc, QEMU, virtme-ng and busybox are needed.

Accelerator (``guest.accel``, ``--accel``): kvm, tcg, or auto (KVM when a probe guest boots with it within a
bound, else refused naming why). Under TCG the CPU is emulated: records say so, and report/compare show no
overhead for them.

The parts: ``model`` (the topology, its ``guest`` settings, the ``qemu:REF`` refs of ``--vms qemu``), ``plan``
(pure: names, addresses, cpus, NUMA policy and nodes' capacity, the launch), ``machine`` (what this host offers:
tools, kernel, the q35 machine and its vCPU limit, /dev/kvm, vhost, the root's share and the memory behind it),
``probe`` (does KVM boot a guest like these: asked once per boot of the host), ``guests`` (start, wait, pin, stop),
``seen`` (what each guest really got: vhost, where its threads run, where its memory is), ``sshd`` (keys and the
guests' sshd), ``life`` (create, tear down, clean up; the flow around them is lifecycle.py's), ``view``
(``topology show``, the record's view), ``dry`` (``--dry-run``: the commands, nothing started), ``qmp``.
"""

from vnetbench.core.errors import UsageError

from ..base import LaunchSpec, Realised, register
from ..thishost.lifecycle import OnThisHost


@register("qemu")
class QemuBackend(OnThisHost, Realised):
    """A qemu topology that is up: brought up by this object (and torn down by ``close``, at exit, and on
    SIGTERM/SIGINT), or attached to (and then left up)."""

    # the guests' root is this host's, shared read-only (a 9p root bound with cache=loose may show a file
    # edited on the host while the guests are up as it was when they first read it)
    ranks_share_this_hosts_files = True

    # ---- refs and specs ------------------------------------------------------------------

    @classmethod
    def load(cls, ref: str, what: str = "--topology"):
        from . import model

        return model.load(ref, what)

    @classmethod
    def from_data(cls, data: dict, source: str, lines=None, host=None):
        from . import model

        return model.from_data(data, source, lines, host)

    @classmethod
    def from_options(cls, ref: str, settings: dict, lone: bool = True) -> str:
        """``--vms qemu`` (or ``--accel``/``--guest-kernel`` with a topology file of ``backend: qemu``): ``ref``'s VMs
        as QEMU guests, ``qemu:REF?accel=..&kernel=..``. A topology without VMs is refused when it is the ``lone``
        one named, and kept as it is beside others (a sweep's baseline)."""
        import os
        from urllib.parse import urlencode

        from .. import file_backend
        from ..base import ref_prefixes
        from ..model import presets

        kernel = settings.get("--guest-kernel")
        if kernel:
            from .model import kernel_file_problem

            problem = kernel_file_problem(kernel)
            if problem:
                raise UsageError(f"--guest-kernel: {kernel}: {problem}")
            kernel = os.path.abspath(kernel)
        if ref in presets.PRESETS and not presets.PRESETS[ref].get("vms") or lone and file_backend(ref) == "local":
            if lone:
                raise UsageError(f"--vms qemu: {ref} has no VMs to boot as QEMU guests (it runs on this host); drop "
                                 f"--vms qemu, or name a topology with VMs")
            return ref  # no VM to boot: a sweep's baseline
        if ref.startswith("qemu:"):
            return ref
        other = next((prefix for prefix in ref_prefixes() if prefix != "qemu" and ref.startswith(f"{prefix}:")), None)
        if other:
            raise UsageError(f"--vms qemu: {ref} names real hosts or a cluster ({other}:), which have no VMs to boot; "
                             f"use --vms qemu with a preset or a topology YAML")
        chosen = {key: value for key, value in (("accel", settings.get("--accel")), ("kernel", kernel)) if value}
        # the qemu backend's ref: REF's VMs as its guests (its model reads the settings)
        return f"qemu:{ref}" + (f"?{urlencode(chosen, safe='/')}" if chosen else "")

    @classmethod
    def dry_run(cls, topology) -> list[str]:
        from . import dry

        return dry.lines(topology)

    # ---- once up -------------------------------------------------------------------------

    def __init__(self, topology):
        from . import plan

        super().__init__(topology)
        self._dir = None
        self._bring_up(topology)
        self.layout = plan.Layout.from_dict(self.state["layout"])

    def check_ranks(self, ranks: int) -> None:
        from ..launch.binding import check_ranks

        check_ranks(ranks)

    def launch(self, ranks: int, bind: str | None = None) -> LaunchSpec:
        from . import plan, sshd

        self.check_ranks(ranks)
        spec = plan.launch_spec(self.layout, ranks, bind, ssh_args=sshd.client(self.layout.id),
                                guests=self.state.get("guests") or {}, hostfile=self._write_hostfile)
        guest = self.state["guest"]
        spec.notes.update({"accel": guest["accel"], "vcpus_enforced_by": "vCPU threads pinned",
                           "memory_limited_by": "guest RAM"})
        if guest["accel"] == "tcg":
            spec.notes["emulated_cpu"] = "TCG: QEMU emulates the guests' CPU; timings are not a hypervisor's"
        return spec

    def own_cpu_seconds(self) -> float | None:
        """The guests' QEMUs, and their vhost workers where those are kernel threads of their own (Linux < 6.4;
        later ones are QEMU's threads, counted with it)."""
        from vnetbench.core.procs import cpu_seconds

        from .seen import threads, vhost_workers

        total = 0.0
        for facts in (self.state.get("guests") or {}).values():
            pid = facts.get("qemu_pid")
            if isinstance(pid, int):
                own = threads(pid)
                total += cpu_seconds(pid) + sum(cpu_seconds(tid) for tid in vhost_workers(pid) if tid not in own)
        return total

    def health(self) -> tuple[str, list[str]] | None:
        """None while every guest, tap, switch and uplink is as it was brought up; else what broke and the VMs
        it cut off. Cheap (a /proc read and an ioctl per VM): a job's watch asks every quarter second."""
        from ..thishost import linux
        from . import guests

        lay, seen = self.layout, self.state.get("guests") or {}
        for vm in lay.vms:
            facts = seen.get(vm.name, {})
            if not guests.alive(facts):
                return f"VM {vm.name}'s guest is gone (its QEMU, pid {facts.get('qemu_pid')}, ended)", [vm.name]
            problem = linux.link_problem(vm.tap)
            if problem:
                return f"VM {vm.name} lost its network: its tap {vm.tap} {problem}", [vm.name]
        return self.fabric_health()

    def _write_hostfile(self, entries) -> str:
        from pathlib import Path

        from vnetbench.core import rundir

        from ..launch.sshlaunch import write_hostfile

        if self._dir is None:
            self._dir = rundir.make_dir("qemu")
        return write_hostfile(Path(self._dir), entries)

    def close(self) -> None:
        if self._dir is not None:
            from vnetbench.core import rundir

            rundir.remove_dir(self._dir)
            self._dir = None
        super().close()
