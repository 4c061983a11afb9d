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


def _options(ref: bool, command: str | None = None) -> list:
    """(backend name, its registry line, option) of every option the backends declare for ``command`` (None: the
    commands that take a topology, run, sweep, exec and topology): those that name a topology (``ref``) or the
    settings of their VMs."""
    from vnetbench.topologies import base

    return [(name, entry, option) for name, entry in base.entries(with_plugins=False).items()
            for option in entry.options if bool(option.ref) == ref
            and (command in option.only if option.only else True)]


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def add_topology(parser, *, required: bool = False) -> None:
    """``--topology REF`` or an option of a backend's that names its topology (the hosts backend's ``--hostfile FILE``
    and ``--inventory FILE``, for its refs ``hostfile:FILE`` and ``inventory:FILE``)."""
    def topology_help():
        from vnetbench.topologies import base
        from vnetbench.topologies.model import presets

        refs = [f"{prefix}:" for prefix in base.ref_prefixes()]
        return (f"a preset ({', '.join(presets.PRESETS)}), a topology YAML, a hostfile or inventory, or a backend's "
                f"ref ({', '.join(refs)}...)" + ("" if required else " (default native: this host, no VMs)"))

    where = parser.add_mutually_exclusive_group(required=required)
    where.add_argument("--topology", default=None if required else "native", metavar="NAME|FILE|REF",
                       help=Shown(topology_help))
    for _, _, option in _options(ref=True):
        where.add_argument(option.flag, metavar=option.metavar, help=option.help)


def add_host_source(parser, command: str) -> None:
    """What ``hosts ACTION`` (``command``, "hosts check") reads its hosts from, one of: ``--topology REF`` or a
    backend's option naming its hosts (``--hostfile``, ``--inventory``, ``--slurm``), and the options qualifying
    one of those (``--group``)."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--topology", metavar="REF", help="the hosts of any topology whose backend has hosts of its "
                                                          "own, as --topology of run takes it (e.g. slurm:PARTITION)")
    for _, _, option in _options(ref=True, command=command):
        (parser if option.of else source).add_argument(option.flag, metavar=option.metavar, help=option.help)


def topology_arg(args) -> str:
    """The topology ref the options name (a backend's option such as ``--hostfile F`` is its ref ``hostfile:F``;
    ``--vms`` as ``vm_ref`` says)."""
    ref, _ = topology_source(args)
    return vm_ref(args, ref)


def topology_source(args, command: str | None = None) -> tuple[str, str]:
    """(the topology ref, the option that gave it) of ``command``'s options (None: run, sweep, exec, topology; or
    a ``hosts`` action): ``--topology REF`` as it is, a backend's option its ref with what the options qualifying
    it add (``--inventory F --group G``: ``inventory:F#G``)."""
    options = [option for _, _, option in _options(ref=True, command=command)]
    for option in options:
        if option.of and getattr(args, _dest(option.flag), None) and not getattr(args, _dest(option.of), None):
            raise UsageError(f"{option.flag}: only with {option.of}")
    for option in options:
        value = getattr(args, _dest(option.flag), None)
        if value and not option.of:
            ref = option.ref.format(value)
            for qualifier in options:
                if qualifier.of == option.flag:
                    ref = qualifier.ref.format(getattr(args, _dest(qualifier.flag), None) or qualifier.default, ref=ref)
            return ref, option.flag
    return args.topology, "--topology"


def _vm_backends() -> dict:
    """``--vms`` choice -> (backend name, what its VMs are), the default VM backend's first."""
    from vnetbench.topologies import base

    lines = base.entries(with_plugins=False)
    found = {entry.vms[0]: (name, entry.vms[1]) for name, entry in lines.items() if entry.vms}
    default = lines[base.DEFAULT_VM_BACKEND].vms[0]
    return {default: found.pop(default), **found}


def add_vms(parser) -> None:
    """``--vms`` (which backend realises a topology's VMs) and the settings of each VM backend's own."""
    kinds = _vm_backends()
    default = next(iter(kinds))
    shown = " or ".join(f"{what} ({choice}{', the default' if choice == default else ''})"
                        for choice, (_, what) in kinds.items())
    parser.add_argument("--vms", choices=tuple(kinds), default=default, help=f"what a topology's VMs are: {shown}")
    for name, entry, option in _options(ref=False):
        parser.add_argument(option.flag, metavar=option.metavar, choices=option.choices,
                            help=f"with --vms {entry.vms[0]}: {option.help}")
    add_switch(parser)


def add_switch(parser) -> None:
    """``--switch KIND``: every switch of the topology of that kind, under a twin name (NAME-KIND)."""
    def kinds_help():
        from vnetbench.topologies import switches

        return (f"every switch of the topology of this kind ({', '.join(switches.names())}), the topology renamed "
                f"NAME-KIND (2vm-2vswitch-ovs) so that its records stay apart (default: as the topology says)")

    parser.add_argument("--switch", metavar="KIND", help=Shown(kinds_help))


def vm_ref(args, ref: str, *, lone: bool = True) -> str:
    """``ref`` as ``--vms`` says (_vm_ref), then as ``--switch`` says (switch_ref)."""
    return switch_ref(args, _vm_ref(args, ref, lone=lone))


def switch_ref(args, ref: str) -> str:
    """``ref`` with ``--switch KIND``: ``switch:KIND:REF``, every switch of REF of that kind (topologies.load)."""
    kind = getattr(args, "switch", None)
    if not kind:
        return ref
    from vnetbench.topologies import switches
    from vnetbench.topologies.model import presets

    switches.driver(kind, "--switch")
    if ref in presets.PRESETS and not presets.PRESETS[ref].get("switches"):
        return ref  # no switch to change (native)
    if _names_other_hosts(ref):
        raise UsageError(f"--switch: {ref} names real hosts, whose switches are theirs; use --switch with a preset "
                         f"or a topology YAML of VMs on this host")
    return f"switch:{kind}:{ref}"


def _names_other_hosts(ref: str) -> bool:
    """Whether ``ref`` is a ref of a backend whose machines are not VMs on this host (no ``vms`` in its registry
    line: real hosts from a hostfile or inventory, a Slurm partition): their switches are not vnetbench's to make."""
    from vnetbench.topologies.base import entries

    prefix = ref.split(":", 1)[0] if ":" in ref else None
    for name, entry in entries().items():
        if prefix is not None and (prefix == name or prefix in entry.prefixes) and entry.refs:
            return entry.vms is None
    return False


def _vm_ref(args, ref: str, *, lone: bool = True) -> str:
    """``ref`` as ``--vms`` says: the default VM backend's as it is; another's the ref its ``from_options`` makes
    (``--vms qemu``: the qemu backend's ``qemu:REF``, with its settings). A VM backend's settings (``--accel``,
    ``--guest-kernel``) also serve a topology file of that backend. ``lone``: ``ref`` is the one topology named
    (a sweep's ``native`` beside others stays native)."""
    from vnetbench import topologies

    kinds = _vm_backends()
    default = next(iter(kinds))
    vms = getattr(args, "vms", None) or default
    owner, settings = kinds[vms][0], {}
    for name, entry, option in _options(ref=False):
        given = getattr(args, _dest(option.flag), None)
        if not given:
            continue
        if entry.vms[0] != vms:
            if topologies.file_backend(ref) != name:
                raise UsageError(f"{option.flag}: only with --vms {entry.vms[0]} or a topology file of backend: "
                                 f"{name}")
            owner = name
        settings[option.flag] = given
    if owner == kinds[default][0]:
        return ref
    return topologies.backend(owner).from_options(ref, settings, lone=lone)


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


def add_profile(parser) -> None:
    parser.add_argument("--profile", nargs="?", const="summary", metavar="MODE",
                        help="profile each rank's MPI calls without rebuilding the program (an LD_PRELOADed PMPI "
                             "interposer): 'summary' (the default) stores per-call, per-peer and collective counts "
                             "and times in the record's 'profile'; 'trace' also keeps each rank's events beside "
                             "the store (docs/profile.md)")


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
    unprofiled = 0
    for record in records:
        profile = record.get("profile")
        if profile and profile.get("status") != "ok":
            unprofiled += 1
            print(f"vnetbench: {record['kernel']} repetition {record['repetition'] + 1}: profile "
                  f"{profile.get('status')}: {profile.get('reason')}", file=sys.stderr)
        if record["status"] != "ok":
            print(f"vnetbench: {record['kernel']} repetition {record['repetition'] + 1}: {record['status']}: "
                  f"{record['validation']['detail'][:500]}", file=sys.stderr)
    print(f"vnetbench: {len(records)} record(s) appended to {store}", file=sys.stderr)
    # a profile asked for and not had whole is no success, whatever the run did
    return 0 if all(record["status"] == "ok" for record in records) and not unprofiled else 1
