"""The options run, sweep and exec share, each defined once, and what they become: a topology ref, rank
options, the exit code of a command's records. Help texts name what the registries hold."""

import sys

from vnetbench.core.errors import UsageError
from vnetbench.core.options import float_range, int_range
from vnetbench.topologies.base import MAX_RANKS


class Shown(str):
    """A help text made only when help is shown: what it lists may take time to find (backends from entry-point
    plugins: importlib.metadata reads every installed distribution), which a run should not pay. argparse reads a
    help text only to strip it and to %-format it."""

    def __new__(cls, make):
        text = super().__new__(cls, "...")
        text.make = make
        return text

    def __mod__(self, params):
        return self.make() % params


def add_topology(parser, *, required: bool = False) -> None:
    """``--topology REF`` or, for real hosts, ``--hostfile FILE`` / ``--inventory FILE`` (the hosts backend's
    refs ``hostfile:FILE`` and ``inventory:FILE``)."""
    def topology_help():
        from vnetbench.topologies import base
        from vnetbench.topologies.model import presets

        refs = [f"{prefix}:" for prefix in base.ref_prefixes()]
        return (f"a preset ({', '.join(presets.PRESETS)}), a topology YAML, a hostfile or inventory, or a backend's "
                f"ref ({', '.join(refs)}...)" + ("" if required else " (default native: this host, no VMs)"))

    where = parser.add_mutually_exclusive_group(required=required)
    where.add_argument("--topology", default=None if required else "native", metavar="NAME|FILE|REF",
                       help=Shown(topology_help))
    where.add_argument("--hostfile", metavar="FILE", help="real hosts from an Open MPI hostfile (as hostfile:FILE)")
    where.add_argument("--inventory", metavar="FILE",
                       help="real hosts from an Ansible inventory, YAML or INI (as inventory:FILE)")


def topology_arg(args) -> str:
    """The topology ref the options name (``--hostfile F`` is ``hostfile:F``, ``--inventory F`` ``inventory:F``;
    with ``--vms qemu``, the topology's VMs as QEMU guests)."""
    if args.hostfile:
        return vm_ref(args, f"hostfile:{args.hostfile}")
    if args.inventory:
        return vm_ref(args, f"inventory:{args.inventory}")
    return vm_ref(args, args.topology)


def add_vms(parser) -> None:
    """``--vms emulated|qemu`` and, for QEMU guests, ``--accel`` and ``--guest-kernel``."""
    parser.add_argument("--vms", choices=("emulated", "qemu"), default="emulated",
                        help="what a topology's VMs are: network namespaces on this host (emulated, the default) "
                             "or QEMU guests on the same switches (qemu)")
    parser.add_argument("--accel", choices=("auto", "kvm", "tcg"),
                        help="with --vms qemu: the guests' accelerator; auto (the default) takes KVM when a probe "
                             "guest boots with it and refuses otherwise; tcg emulates the CPU (behaviour, not "
                             "timings)")
    parser.add_argument("--guest-kernel", metavar="PATH",
                        help="with --vms qemu: the kernel image the guests boot (default: the running kernel's in "
                             "/boot, else the newest there)")


def vm_ref(args, ref: str) -> str:
    """``ref`` as ``--vms`` says (emulated: as it is; qemu: the qemu backend's ``qemu:REF``, with the options)."""
    vms = getattr(args, "vms", "emulated")
    accel, kernel = getattr(args, "accel", None), getattr(args, "guest_kernel", None)
    if vms != "qemu":
        for given, name in ((accel, "--accel"), (kernel, "--guest-kernel")):
            if given:
                raise UsageError(f"{name}: only with --vms qemu")
        return ref
    if kernel:
        import os

        if not os.path.isfile(kernel):
            raise UsageError(f"--guest-kernel: {kernel}: no such file; give a kernel image such as "
                             f"/boot/vmlinuz-VERSION")
        kernel = os.path.abspath(kernel)
    from urllib.parse import urlencode

    from vnetbench.topologies.model import presets

    if ref in presets.PRESETS and not presets.PRESETS[ref].get("vms") or ref.startswith("qemu:"):
        return ref  # no VM to boot
    from vnetbench.topologies import base

    other = next((prefix for prefix in base.ref_prefixes() if prefix != "qemu" and ref.startswith(f"{prefix}:")), None)
    if other:
        raise UsageError(f"--vms qemu: {ref} names real hosts or a cluster ({other}:), which have no VMs to boot; "
                         f"use --vms qemu with a preset or a topology YAML")
    settings = {key: value for key, value in (("accel", accel), ("kernel", kernel)) if value}
    # the qemu backend's ref: REF's VMs as its guests (it reads the settings)
    return f"qemu:{ref}" + (f"?{urlencode(settings, safe='/')}" if settings else "")


def add_ranks(parser, *, required: bool = False) -> None:
    parser.add_argument("--ranks", type=int_range(1, MAX_RANKS), required=required, default=None if required else 2,
                        metavar="N", help="MPI ranks" + ("" if required else " (default 2)"))


def add_repeat(parser, *, default: int | None = 1) -> None:
    shown = f" (default {default})" if default else ""
    parser.add_argument("--repeat", type=int_range(1, 1000), default=default, metavar="R",
                        help=f"repetitions, each stored as its own record{shown}")


def add_store(parser, *, default: bool = True, help: str = "results store, JSON Lines") -> None:
    from vnetbench.core.store import DEFAULT_PATH

    parser.add_argument("--store", default=str(DEFAULT_PATH) if default else None, metavar="PATH",
                        help=f"{help} (default {DEFAULT_PATH})")


def add_timeout(parser, *, default: str = "the workload's: per kernel, or the application's timeout") -> None:
    parser.add_argument("--timeout", type=float_range(0.001), metavar="S",
                        help=f"seconds before a run is killed with its whole process tree, its record saying "
                             f"'timeout' (default: {default})")


def add_bind(parser) -> None:
    from vnetbench.topologies.launch.binding import BIND_CHOICES

    parser.add_argument("--bind", choices=BIND_CHOICES,
                        help="bind each rank to a core (default when ranks fit the cores; VMs' ranks run on their "
                             "vCPUs) or not")


def add_mpi(parser) -> None:
    from vnetbench.mpi import selection as mpiselect

    mpiselect.add_option(parser)


def add_rank_options(parser) -> None:
    from vnetbench import kernels

    kernels.add_rank_options(parser)


def rank_options(args) -> dict:
    """The rank options (``kernels.RANK_OPTIONS``) that were set."""
    from vnetbench import kernels

    return {key: getattr(args, key) for key in kernels.RANK_OPTIONS if getattr(args, key, None)}


def add_app(parser) -> None:
    parser.add_argument("--app", metavar="FILE.yaml",
                        help="run a real application defined in FILE.yaml (command, parser, success, metrics) "
                             "instead of a kernel")


def finish(records: list[dict], store, form: str | None) -> int:
    """Print the records (``form``: a run format, None: nothing more on stdout), what did not pass, where they
    went; the exit code: 0 when every run passed, else 1."""
    if form is not None:
        from vnetbench.analysis import formats

        print(formats.run_text(form, records))
    for record in records:
        if record["status"] != "ok":
            print(f"vnetbench: {record['kernel']} repetition {record['repetition'] + 1}: {record['status']}: "
                  f"{record['validation']['detail'][:500]}", file=sys.stderr)
    print(f"vnetbench: {len(records)} record(s) appended to {store}", file=sys.stderr)
    return 0 if all(record["status"] == "ok" for record in records) else 1
