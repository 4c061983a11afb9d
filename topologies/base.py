"""The backend interface: what every topology backend owns, from the ref a user types to the last cleanup.

A backend is one package (or module) of ``vnetbench.topologies`` holding one subclass of ``Backend``
decorated ``@register("NAME")``, and one line in ``BACKENDS`` below; nothing else in vnetbench names it.
Its class methods are its life outside a run, its instances are topologies it realised:

- refs: ``load(ref)`` for ``NAME:REST`` (and the extra prefixes of its registry line, e.g. the hosts
  backend's ``hostfile:``), ``claims(path, text)`` for files that are not topology YAML (hostfiles,
  inventories), ``from_data(data, source, lines)`` for YAML topologies saying ``backend: NAME`` (the default
  refuses them: a backend that reads YAML says with which model), ``from_preset(name, data)`` for presets;
- before bring-up (on the loaded topology): ``preflight``, ``planned_bind``, ``cannot_place``,
  ``check_launcher``, ``preview`` and ``show`` (``topology show``);
- its life: ``realise`` (bring up or attach; a context manager), ``up``/``down`` (``topology up|down``:
  left up between runs), ``status`` and ``cleanup`` (what is up, what crashed runs left);
- hosts: ``check_hosts``, ``facts``, ``fetch`` (``hosts check|facts|fetch``), where the backend has hosts of
  its own;
- batch: ``batch(topology)``, a ``Batch`` that submits runs as a scheduler's jobs instead of bringing
  the topology up in this process (Slurm outside an allocation), or None.

Once realised: ``launch(ranks, bind)`` returns a ``LaunchSpec`` whose ``Intent`` says hosts and slots, the
launch agent, the subnet MPI traffic stays on, the binding (a launcher flavour renders it; a backend never
builds an MPI's argv); ``check_ranks``, ``health``, ``describe``, ``close``; and the class attribute
``ranks_share_this_hosts_files`` (default False): True when the ranks read this host's files, vnetbench's
source among them, so that the launcher's git facts of that source stand for theirs in the record; and
``ranks_write_this_hosts_files`` (default False): True when what the ranks write into the job's folder (vnetbench's
state, /run/vnetbench) is there on this host after the job (--profile's files come back that way).

A backend imports nothing above ``vnetbench.topologies`` but the data-layer modules ``vnetbench.core.errors``,
``procs``, ``registry``, ``rundir``, ``records`` and ``store``: it is handed what it must run (a batch job's
command, a workload's request) and never imports the runtime.

Out-of-tree backends register through the ``vnetbench.backends`` entry-point group (name = backend name,
value = its module, or ``module:attribute``), found the first time a name is not in ``BACKENDS``: such a
backend is its package and its distribution's entry point, and no vnetbench file names it.

This module imports no spec model: the models (spec.py, a backend's own) stand above the registry.
"""

from abc import ABC, abstractmethod
from collections import namedtuple
from collections.abc import Callable

from vnetbench.core.errors import SpecError, UsageError
from vnetbench.core.registry import Registry

from .launch.intent import Intent, prrte_args


class Option(namedtuple("Option", "flag help metavar choices ref only of default",
                        defaults=(None, None, None, None, None, None))):
    """A command-line option a backend adds to the commands that take a topology (run, sweep, exec, topology, and
    ``hosts``' actions): with ``ref`` (a format, ``hostfile:{}``) its value is the topology, in place of
    ``--topology``; without, it is a setting of the backend's VMs (``--accel``) that its ``from_options`` reads when
    ``--vms`` chose it. ``only``: the commands that offer it (None: every one that takes a topology; a name such
    as ``hosts check`` is a command and its action). ``of``: the ref option it qualifies, its ``ref`` a format of
    that option's ref and its own value (``{ref}#{}``, ``default`` when it is not given: ``--group`` of
    ``--inventory``); given without that option, it is refused."""

    __slots__ = ()


class Entry(namedtuple("Entry", "module prefixes refs options vms links", defaults=((), True, (), None, ()))):
    """A backend's registry line: its ``module`` (under ``vnetbench.topologies``, or absolute for a plugin),
    the ref ``prefixes`` it owns besides ``NAME:``, and whether ``NAME:REST`` is a ref it loads (``refs``;
    False for a backend whose topologies are presets and YAML files only: it is then left out of the refs
    offered); the command-line ``options`` it adds (``Option``), and for a backend that realises a topology's
    VMs, ``vms``: (its name among ``--vms``'s choices, what its VMs are), and ``links``: the names of the host links
    its VMs plug into the fabric, after ``vnbID`` (regular expressions; ``state.ANY_LINK`` is the fabric's and these).
    Data, so that a command's parser is
    built without importing any backend. A named tuple, not a dataclass, as every class a run's start makes
    (``vnetbench.cli`` says why)."""

    __slots__ = ()


PLUGIN_GROUP = "vnetbench.backends"
# name -> where its backend lives; the order is the order of listings (topology status, cleanup)
BACKENDS = Registry("backend", {
    "local": Entry("local", refs=False),
    "netns": Entry("netns", refs=False, vms=("emulated", "network namespaces on this host"), links=(r"v\d{1,3}",)),
    # qemu:REF is REF's VMs as QEMU guests (--vms qemu)
    "qemu": Entry("qemu", vms=("qemu", "QEMU guests on the same switches"), links=(r"t\d{1,3}",), options=(
        Option("--accel", "the guests' accelerator; auto (the default) takes KVM when a probe guest boots with it "
                          "and refuses otherwise; tcg emulates the CPU (behaviour, not timings)",
               choices=("auto", "kvm", "tcg")),
        Option("--guest-kernel", "the kernel image the guests boot (default: the running kernel's in /boot, else "
                                 "the newest there)", metavar="PATH"))),
    "hosts": Entry("hosts", prefixes=("hostfile", "inventory"), options=(
        Option("--hostfile", "real hosts from an Open MPI hostfile (as hostfile:FILE)", "FILE", ref="hostfile:{}"),
        Option("--inventory", "real hosts from an Ansible inventory, YAML or INI (as inventory:FILE)", "FILE",
               ref="inventory:{}"),
        Option("--group", "inventory group of the hosts (default: every host)", "NAME", ref="{ref}#{}",
               only=("hosts check", "hosts facts", "hosts fetch"), of="--inventory", default="all"))),
    "slurm": Entry("slurm", options=(
        Option("--slurm", "the nodes of a Slurm partition, through srun (as slurm:PARTITION)", "PARTITION",
               ref="slurm:{}", only=("hosts check",)),)),
}, package=__package__, attribute="backend", plugins=PLUGIN_GROUP, plugin_line=Entry, registers=True)
# the backend of a topology spec that names none: with VMs the default VM backend (``vms: emulated`` in the
# CLI's words), without VMs this host's
DEFAULT_VM_BACKEND = "netns"
DEFAULT_HOST_BACKEND = "local"
# the most ranks any backend starts, and what --ranks allows
MAX_RANKS = 4096


class LaunchSpec:
    """How to start ranks on a realised topology.

    ``intent`` is what to start, whatever the MPI (a launcher flavour renders it); ``env`` is added
    to the launcher's environment; ``expected_placement[i]`` is what rank i must see of itself
    (hostname, address, cpus: checked on the rank); ``placement_labels[i]`` is what the topology
    says of rank i (vm, switch, ...), merged into the record's placement; ``notes`` are facts the
    record keeps (oversubscribed, yield_when_idle and why). When set, ``starter(launcher, program)`` is
    the argv that starts the ranks instead of the MPI's own launcher (the slurm backend's srun with the
    site's PMI), or None for the MPI's own; it notes in ``notes`` what it chose.

    A plain class, not a dataclass, as every class a run's start makes (``vnetbench.cli`` says why).
    """

    def __init__(self, intent: Intent, env: dict[str, str] | None = None, expected_placement: list[dict] | None = None,
                 placement_labels: list[dict] | None = None, notes: dict | None = None,
                 starter: Callable[[object, list[str]], list[str]] | None = None):
        self.intent, self.expected_placement, self.placement_labels = intent, expected_placement, placement_labels
        self.env = {} if env is None else env
        self.notes = {} if notes is None else notes
        self.starter = starter

    def __repr__(self) -> str:
        return f"LaunchSpec({vars(self)})"

    @property
    def ranks(self) -> int:
        return self.intent.ranks

    @property
    def mpirun_args(self) -> list[str]:
        """The intent as Open MPI 5 arguments (between ``mpirun`` and the program)."""
        return prrte_args(self.intent)

    @property
    def mca(self) -> dict[str, str]:
        """What the record reports as the MCA settings used."""
        return self.intent.recorded_mca()


class HostReport:
    """What ``check_hosts`` found on one host; ``problems`` empty means the host passed. ``clock_offset`` is
    known to within +- ``clock_window`` seconds. A plain class (``vnetbench.cli`` says why)."""

    def __init__(self, name: str, address: str, reached: bool = False, probe: dict | None = None,
                 clock_offset: float | None = None, clock_window: float | None = None,
                 problems: list[str] | None = None):
        self.name, self.address, self.reached = name, address, reached
        self.probe = {} if probe is None else probe
        self.clock_offset, self.clock_window = clock_offset, clock_window
        self.problems = [] if problems is None else problems

    def __repr__(self) -> str:
        return f"HostReport({vars(self)})"

    @property
    def ok(self) -> bool:
        return self.reached and not self.problems


class Batch(ABC):
    """A scheduler that runs what is asked as batch jobs (``Backend.batch``).

    A request is JSON-able data the runtime made (the workload, ranks, repetitions, timeout, the topology's
    ref, the launcher's path, ...); ``command`` is the argv that runs a request file on the job's first node
    (the runtime's, appended with the request's path): the backend submits, watches, cancels and collects,
    and never imports the runtime that made the request.
    """

    @abstractmethod
    def run(self, topology, request: dict, ranks: int, *, command: list[str], store, launcher,
            on_record: Callable[[dict], None] | None = None) -> list[dict]:
        """One job running ``request``; wait; append its records to ``store`` (a Store or None), return them."""

    @abstractmethod
    def sweep(self, items: list, *, command: list[str], store, launcher, resume: bool, on_start=None,
              on_finish=None, say=None) -> list[dict]:
        """Every ``BatchItem`` of a sweep submitted at once, collected as they end; ``on_finish(item, None)``
        for one cancelled outside the sweep."""


class BatchItem(namedtuple("BatchItem", "topology request ranks repetition key label job")):
    """One run of a sweep for ``Batch.sweep``: its topology and request (one repetition), the key that finds it
    again in a ledger on --resume (configuration and repetition), how to name it in messages (``label``), and
    the sweep's own job object (handed back to ``on_start``/``on_finish``)."""

    __slots__ = ()


class Backend(ABC):
    """A topology backend; an instance is a topology it realised (a context manager that closes on exit).

    The runtime (engine, sweep, commands) uses only what is declared here.
    """

    backend = "abstract"  # set by @register
    brought_up = False  # True when this object brought the topology up (and close() takes it down)
    # the ranks read this host's files (its vnetbench source among them): this host, its namespaces, guests that
    # share its root. Then what the launcher knows of the source stands for the ranks' (environment.source)
    ranks_share_this_hosts_files = False
    ranks_write_this_hosts_files = False

    def __init__(self, topology):
        self.topology = topology

    # ---- refs and specs ------------------------------------------------------------------

    @classmethod
    def load(cls, ref: str, what: str = "--topology"):
        """The topology ``ref`` names: ``NAME:REST`` or one of the registry line's prefixes (the whole ref is
        given). UsageError/SpecError naming ``what`` when it does not load."""
        raise UsageError(f"{what}: {ref!r}: the {cls.backend} backend takes no such reference")

    @classmethod
    def claims(cls, path, text: str) -> bool:
        """``path`` (its first bytes in ``text``) is a file of this backend that is not a topology YAML
        (a hostfile, an inventory); ``load(str(path))`` then reads it."""
        return False

    @classmethod
    def from_data(cls, data: dict, source: str, lines=None):
        """A YAML topology (already parsed; ``lines`` locate its fields) whose ``backend:`` is this one.

        The default refuses: a backend that reads YAML topologies says with which model (the VM topology model:
        ``spec.from_dict(data, source, lines)``; VMs sized for this host: ``sizing.fit``; a model of its own)."""
        hint = f"a ref {cls.backend}:..." if entries().get(cls.backend, Entry("")).refs else "a preset"
        raise SpecError(f"{source}: backend: the {cls.backend} backend reads no YAML topology; use {hint}")

    @classmethod
    def from_preset(cls, name: str, data: dict):
        """The preset ``name`` of presets.py (``data``: its spec, written by vnetbench). The default reads it as
        any YAML topology of this backend; a backend may spare a preset that has nothing to check its model."""
        return cls.from_data(data, f"preset {name}", None)

    # ---- before bring-up (on the loaded topology) ----------------------------------------

    @classmethod
    def from_options(cls, ref: str, settings: dict, lone: bool = True) -> str:
        """The ref that ``--vms`` choosing this backend (or its settings given with a topology file of its own) makes
        of ``ref`` (what the other options named), with ``settings`` (flag -> value) of its registry line's options
        that were given; ``lone``: ``ref`` is the only topology named. UsageError when it cannot."""
        raise UsageError(f"--vms: the {cls.backend} backend takes no topology of another's")

    @classmethod
    def preflight(cls, topology) -> None:
        """Raise UsageError when this host cannot realise ``topology`` (no root, a tool missing);
        nothing is created. A sweep skips such topologies instead of refusing the sweep."""

    @classmethod
    def planned_bind(cls, topology, ranks: int, bind: str | None) -> str | None:
        """The binding ``ranks`` ranks will run with, when known before bring-up; None when only the
        realised topology knows. UsageError when ``bind`` cannot be honoured for ``ranks``."""
        return None

    @classmethod
    def cannot_place(cls, topology, ranks: int) -> str | None:
        """Why ``ranks`` ranks make no sense on ``topology`` (known before bring-up), or None."""
        return None

    @classmethod
    def check_launcher(cls, topology, launcher) -> None:
        """Raise UsageError when ranks of ``launcher`` (a flavours.Launcher) cannot be started on
        ``topology`` (a scheduler whose srun lacks the MPI's PMI); nothing is started."""

    @classmethod
    def preview(cls, topology) -> dict:
        """What ``topology show --json`` adds to the spec: the topology as this host would realise it."""
        return {}

    @classmethod
    def show(cls, topology, preview: dict) -> list:
        """``topology show``'s text below its title: lines (str) and tables ((headers, rows))."""
        return [f"backend {cls.backend}"]

    @classmethod
    def dry_run(cls, topology) -> list[str]:
        """``topology up|show --dry-run``: every command bringing ``topology`` up would run, one a line; nothing
        is started."""
        raise UsageError(f"--dry-run: topology {topology.name!r} (backend {cls.backend}) has no guests whose commands "
                         f"to show; it applies to --vms qemu")

    # ---- life outside a run --------------------------------------------------------------

    @classmethod
    def realise(cls, topology) -> "Backend":
        """Bring ``topology`` up, or attach to it when it is up; the realised topology."""
        return cls(topology)

    @classmethod
    def up(cls, topology) -> list[str]:
        """``topology up``: bring ``topology`` up and leave it up; lines that say what is up."""
        raise UsageError(f"topology {topology.name!r} (backend {cls.backend}): there is nothing to bring up; "
                         f"runs use it as it is")

    @classmethod
    def down(cls, ref: str, topology=None) -> str | None:
        """``topology down REF``: take down what ``up`` left up (``topology``: REF loaded, when it loads);
        what was taken down, or None when nothing of REF was up."""
        return None

    @classmethod
    def status(cls) -> list[dict]:
        """``topology status``: what this backend has up, one dict per topology with at least ``name``, ``id``,
        ``subnet``, ``vms`` (a count or list), ``age_s`` and ``state`` (a phrase)."""
        return []

    @classmethod
    def cleanup(cls, everything: bool = False, force: bool = False) -> list[str]:
        """``topology cleanup``: remove what crashed runs left behind (with ``everything``, also what ``up``
        left up; never a topology a live run holds, unless ``force``); what was removed, one phrase each. Cheap
        and silent where the backend made nothing."""
        return []

    # ---- hosts and batch -----------------------------------------------------------------

    @classmethod
    def check_hosts(cls, topology, *, venv: str | None, timeout: float, clock_tolerance: float,
                    mpi: str | None) -> list[HostReport]:
        """``hosts check``: can this topology's hosts run vnetbench together; one report per host."""
        raise UsageError(f"hosts check: topology {topology.name!r} (backend {cls.backend}) has no hosts of its "
                         f"own to check")

    @classmethod
    def facts(cls, topology, *, venv: str | None, timeout: float) -> dict[str, dict]:
        """``hosts facts``: host name -> its CPU, NUMA and NIC facts, or {"error": why}."""
        raise UsageError(f"hosts facts: topology {topology.name!r} (backend {cls.backend}) has no hosts of its own")

    @classmethod
    def fetch(cls, topology, remote: str, add, *, timeout: float) -> dict[str, dict]:
        """``hosts fetch``: the records in file ``remote`` on every host, each handed to ``add(record) -> bool``
        (True: new to the store); host name -> {"new", "known", "bad"} counts, {"missing": True} or {"error"}."""
        raise UsageError(f"hosts fetch: topology {topology.name!r} (backend {cls.backend}) has no hosts of its own")

    @classmethod
    def batch(cls, topology) -> Batch | None:
        """A Batch that submits runs on ``topology`` as a scheduler's jobs instead of bringing it up in this
        process, or None."""
        return None

    # ---- once up -------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.topology.name

    def describe(self) -> dict:
        """The record's ``topology`` field."""
        return {"name": self.topology.name, "backend": self.backend, "spec": self.topology.to_dict()}

    @abstractmethod
    def launch(self, ranks: int, bind: str | None = None) -> LaunchSpec:
        """The LaunchSpec for ``ranks`` ranks; UsageError when they cannot be placed or bound so."""

    def check_ranks(self, ranks: int) -> None:
        """Raise UsageError when ``ranks`` cannot be placed on this topology."""

    def health(self) -> tuple[str, list[str]] | None:
        """None while the topology is as it was brought up; else (what broke, the VMs it cut off).
        Cheap: a job's watch asks every quarter second."""
        return None

    def own_cpu_seconds(self) -> float | None:
        """CPU seconds used so far by what works for this topology's runs outside the launching process's own
        children (its VMs' processes, its guests' QEMUs): a run's host-load reading (procs.HostLoad) counts
        them as the run's, not as other work's. 0.0 where a job's processes are all the launcher's children;
        None where they cannot be told from other work's."""
        return 0.0

    def close(self) -> None:
        """Tear down what this object brought up (nothing, for a topology that was already up)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# what the runtime calls a topology that is up
Realised = Backend


def idle_vms(vms: int, ranks: int) -> str | None:
    """``cannot_place`` of a backend whose ``vms`` VMs must each get a rank."""
    if vms and ranks < vms:
        return f"{ranks} rank(s) for {vms} VMs would leave a VM idle; use at least {vms} ranks"
    return None


# ---- the registry -------------------------------------------------------------------------

register = BACKENDS.register


def entries(with_plugins: bool = True) -> dict[str, Entry]:
    """Every backend's registry line, in-tree ones first."""
    return BACKENDS.lines(with_plugins)


def names() -> tuple[str, ...]:
    return BACKENDS.names()


def ref_prefixes(with_plugins: bool = True) -> list[str]:
    """Every ``PREFIX`` of a ref ``PREFIX:REST`` that a backend loads, in registry order."""
    return [prefix for name, entry in entries(with_plugins).items()
            for prefix in ((name,) if entry.refs else ()) + entry.prefixes]


def default_backend(data) -> str:
    """The backend of a YAML topology (``data``, as parsed) that names none."""
    return DEFAULT_VM_BACKEND if isinstance(data, dict) and data.get("vms") else DEFAULT_HOST_BACKEND


def prefix_owner(prefix: str) -> str | None:
    """The backend that owns refs ``PREFIX:...`` (its name, or one of its registry line's prefixes)."""
    for table in (BACKENDS, None):  # plugins are looked for only when no in-tree backend owns it
        for name, entry in (table if table is not None else BACKENDS.plugins()).items():
            if prefix == name or prefix in entry.prefixes:
                return name
    return None


def backend(name: str, what: str = "backend") -> type[Backend]:
    """The class of the backend called ``name``; UsageError naming the ones available."""
    return BACKENDS.load(name, what)
