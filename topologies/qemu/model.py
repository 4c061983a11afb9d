"""The qemu backend's topologies: any VM topology, with how its guests boot (``guest:``), and its refs.

A qemu topology is the VM topology model (spec.py: VMs, switches, uplinks, placement, subnet; sized for this
host by sizing.py, as the emulated VMs are) plus one mapping of its own, ``guest``::

    backend: qemu
    guest:
      accel: auto          # auto | kvm | tcg (auto: KVM when a probe guest boots, else refused)
      kernel: /boot/vmlinuz-6.1.0-56-amd64   # default: the running kernel's image, else the newest in /boot
      boot_timeout: 120    # seconds from start to sshd answering (default 60 under KVM, 300 under TCG)

Why ``backend: qemu`` and ``guest:`` rather than the CLI's ``--vms qemu`` as a YAML field: ``vms:`` is already
the list of a topology's VMs. ``--vms qemu`` (run, sweep, exec, topology up) turns a preset or a YAML topology
of emulated VMs into its QEMU twin, named NAME-qemu, so that its records, its state and its VMs' hostnames
never mix with the emulated topology's (a store holding both shows them as two rows). The CLI says it as a ref,
``qemu:REF`` with ``?accel=tcg&kernel=PATH`` when the options were given, which every command loads alike.
"""

import os
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import parse_qsl

from pydantic import BaseModel, ConfigDict, PlainValidator, PrivateAttr

from vnetbench.core.errors import SpecError, UsageError

from ..model import units
from ..model.spec import Topology

BACKEND = "qemu"
ACCELS = ("auto", "kvm", "tcg")
SUFFIX = "-qemu"
MIN_GUEST_MEMORY = 256 << 20  # a guest that boots the host's root over 9p and runs Python ranks
SETTINGS = {"accel": "accel", "kernel": "kernel"}  # a ref's ?KEY= -> the guest field it sets
FLAGS = {"accel": "--accel", "kernel": "--guest-kernel"}  # a guest field -> the option that sets it


def _kernel(value):
    if not isinstance(value, str) or not os.path.isabs(value) or "\n" in value or len(value) > 4096:
        raise ValueError(f"expected the absolute path of a kernel image, got {units.shown(value)}")
    problem = kernel_file_problem(value)
    if problem:
        raise ValueError(f"{value}: {problem}")
    return value


def kernel_file_problem(path: str) -> str | None:
    """Why ``path`` cannot be a guest kernel image as a file (missing, not a regular file, unreadable), or None."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "no such file; give a kernel image such as /boot/vmlinuz-VERSION"
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if not stat.S_ISREG(mode):
        kind = ("a folder" if stat.S_ISDIR(mode) else "a character device" if stat.S_ISCHR(mode) else
                "a block device" if stat.S_ISBLK(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
                "a socket" if stat.S_ISSOCK(mode) else "not a file")
        return f"{kind}, not a regular file; give a kernel image such as /boot/vmlinuz-VERSION"
    if not os.access(path, os.R_OK):
        return "not readable by this user"
    return None


def _seconds(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 1 <= value <= 3600:
        raise ValueError(f"expected seconds from 1 to 3600, got {units.shown(value)}")
    return value


class Guest(BaseModel):
    """How each VM of a qemu topology boots."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    accel: Literal["auto", "kvm", "tcg"] = "auto"
    kernel: Annotated[str, PlainValidator(_kernel)] | None = None
    boot_timeout: Annotated[float, PlainValidator(_seconds)] | None = None


class _GuestField(BaseModel):
    """``guest`` alone, validated where it stands in the file (its errors say ``guest.accel``)."""

    model_config = ConfigDict(frozen=True)

    guest: Guest = Guest()


class QemuTopology(Topology):
    """A VM topology whose VMs are QEMU guests (``guest``: how they boot)."""

    guest: Guest = Guest()
    # the guest fields the command line set (``qemu:REF?accel=..``): field -> the option's name
    _flags: dict = PrivateAttr(default_factory=dict)

    def given(self, field: str) -> tuple[str, str]:
        """(where the guest's ``field`` came from, as an error's start; how to give it VALUE there): the option,
        the file and line of ``guest.FIELD``, or the option's default."""
        value = getattr(self.guest, field)
        if field in self._flags:
            return f"{self._flags[field]} {value}", f"{self._flags[field]} {{}}"
        if self._lines.get(("guest", field)) is not None:
            return f"{self.locate('guest', field)} {value}", f"guest.{field}: {{}} in {self.source}"
        return f"{FLAGS[field]} {value} (the default)", f"{FLAGS[field]} {{}}"


def from_data(data, source: str, lines=None, host=None) -> QemuTopology:
    """A qemu topology from YAML data: the VM topology fitted to ``host`` (this one by default), its ``guest``
    mapping, and what guests need beyond emulated VMs (memory for a guest, and no more than the host's)."""
    from ..model import sizing, validation

    if not isinstance(data, dict):
        return sizing.fit(data, source, lines, host)  # the model's own error for a non-mapping
    settings = validation.validated(_GuestField, {"guest": data["guest"]} if "guest" in data else {}, source, lines)
    rest = {key: value for key, value in data.items() if key != "guest"}
    fitted = sizing.fit(rest, source, lines, host,
                        checks=(sizing.one_host("the qemu backend runs its guests on this one host"),))
    problems = memory_problems(fitted, host) + vcpu_problems(fitted)
    if problems:
        raise SpecError(validation.report(source, lines, problems))
    topology = QemuTopology.model_construct(**{name: getattr(fitted, name) for name in Topology.model_fields},
                                            guest=settings.guest)
    topology._source, topology._lines, topology._scaled = fitted._source, fitted._lines, fitted._scaled
    return topology


def memory_problems(topology, host=None) -> list[tuple[tuple, str]]:
    """A guest's memory is really allocated: each at least what a guest needs, all together within the host's."""
    from ..thishost.host import detect

    host = host or detect()
    problems = [(("vms", i, "memory"), f"{units.human_size(vm.memory)} is too little for a guest; allowed: at "
                                       f"least {units.human_size(MIN_GUEST_MEMORY)}")
                for i, vm in enumerate(topology.vms) if vm.memory < MIN_GUEST_MEMORY]
    total = sum(vm.memory for vm in topology.vms)
    if total > host.memory:
        problems.append((("vms",), f"the guests' memory adds up to {units.human_size(total)}, above this host's "
                                   f"{units.human_size(host.memory)}; give the VMs less memory"))
    elif not problems:
        import ipaddress

        from . import plan

        lay = plan.layout(topology, host, ipaddress.IPv4Network("192.0.2.0/24"))  # addresses play no part here
        problems += [(("vms",), f"{problem}; give its VMs less memory, or place them on other nodes (numa, "
                                f"memory_policy)") for problem in plan.capacity_problems(lay, host.memory_by_node)]
    return problems


def vcpu_problems(topology) -> list[tuple[tuple, str]]:
    """A guest's vCPUs within what QEMU's machine type takes (QEMU asked once; not checked without QEMU, which
    the backend's preflight then refuses)."""
    from . import machine

    found = machine.machine_type()
    if not found or not found.get("max_cpus"):
        return []
    return [(("vms", i, "vcpus"), f"{vm.vcpus} vCPUs are more than QEMU's {machine.MACHINE} machine "
                                  f"({found['name']}) takes; allowed: 1 to {found['max_cpus']}")
            for i, vm in enumerate(topology.vms) if vm.vcpus > found["max_cpus"]]


# ---- refs -----------------------------------------------------------------------------------

def load(ref_text: str, what: str = "--topology"):
    """``qemu:REF[?SETTINGS]``: REF (a preset or a YAML topology of VMs) with its VMs as QEMU guests, named
    NAME-qemu unless it says ``backend: qemu`` itself; a topology without VMs as it is."""
    from ..model import presets

    rest = ref_text.split(":", 1)[1]
    typed, settings = _split(rest, what)
    if typed in presets.PRESETS:
        data, source, lines = dict(presets.PRESETS[typed]), f"preset {typed}", None
    else:
        data, source, lines = _read(typed, what)
    if not isinstance(data, dict):
        raise SpecError(f"{source}: expected a mapping of topology fields")
    from ..base import DEFAULT_HOST_BACKEND, DEFAULT_VM_BACKEND, default_backend

    chosen = data.get("backend", default_backend(data))
    if chosen == DEFAULT_HOST_BACKEND:
        from .. import load as load_any

        return load_any(typed, what)  # no VM to boot: the topology as it is
    if chosen not in (DEFAULT_VM_BACKEND, BACKEND):
        raise UsageError(f"{what}: {typed}: a topology of the {chosen} backend has no VMs of this host to boot "
                         f"as QEMU guests; --vms qemu applies to presets and topologies of emulated VMs")
    if chosen != BACKEND:
        name = data.get("name")
        if isinstance(name, str) and len(name + SUFFIX) > 32:
            raise UsageError(f"{what}: {typed}: its name {name!r} is too long for its QEMU twin {name + SUFFIX!r} "
                             f"(32 characters at most); shorten it, or write the topology with backend: qemu")
        if isinstance(name, str):
            data["name"] = name + SUFFIX
        data["backend"] = BACKEND
    if settings:
        guest = data.get("guest") if isinstance(data.get("guest"), dict) else {}
        data["guest"] = {**guest, **settings}
    topology = from_data(data, source, lines)
    if isinstance(topology, QemuTopology):
        topology._flags = {field: FLAGS[field] for field in settings}
    return topology


def _split(rest: str, what: str) -> tuple[str, dict]:
    """(REF, settings) of ``REF?accel=A&kernel=K``; a REF that is an existing path is taken whole."""
    if "?" not in rest or Path(rest).exists():
        return rest, {}
    typed, _, query = rest.rpartition("?")
    settings = {}
    for key, value in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
        if key not in SETTINGS:
            raise UsageError(f"{what}: qemu:{rest}: unknown setting {key!r}; allowed: {', '.join(SETTINGS)}")
        settings[SETTINGS[key]] = value
    return typed, settings


def _read(typed: str, what: str):
    from ..model import validation
    from ..model.spec import MAX_SPEC_BYTES

    path = Path(typed)
    if not path.is_file():
        if path.exists():
            raise UsageError(f"{what}: {typed}: not a regular file")
        raise UsageError(f"{what}: {typed}: neither a preset nor a topology file")
    data, lines = validation.read(path, str(path), "a topology spec", MAX_SPEC_BYTES, "a topology file")
    return data, str(path), lines
