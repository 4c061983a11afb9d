"""The backend interface every topology backend implements, and the one registry the runtime asks.

How to add a backend (say ``slurm``):

1. Write ``topologies/slurm.py`` with a subclass of ``Realised`` decorated ``@register("slurm")``.
   ``__init__(topology)`` brings the topology up (or attaches to it) and sets ``brought_up``;
   ``launch(ranks, bind)`` returns a ``LaunchSpec`` whose ``Intent`` says hosts and slots, the launch
   agent, the subnet MPI traffic stays on, the binding; ``close()`` undoes what ``__init__`` did and
   nothing else. Override ``check_ranks``, ``health``, ``describe``, and the class-level checks
   ``preflight`` and ``planned_bind`` where the backend has something to say.
2. Add one line to ``MODULES`` below (name -> module); the module is imported the first time a
   topology names that backend, so a backend's imports cost nothing to runs that do not use it.
3. Add ``tests/unit/test_<name>_backend.py`` (launch intent, refusals) and, where it can run here
   for real, a test in the tier that has what it needs.

A backend imports nothing above ``vnetbench.topologies`` except the leaf modules ``vnetbench.errors``,
``vnetbench.procs``, ``vnetbench.registry`` and ``vnetbench.rundir``; launcher flavours read its ``Intent``, it never
builds another MPI's argv itself.
"""

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable

from vnetbench.registry import Registry

from .intent import Intent, prrte_args

# backend name -> module of this package that registers it (imported on first use)
MODULES = {
    "local": "local",
    "netns": "netns",
    "hosts": "hosts",
    "slurm": "slurm",
}
_BACKENDS = Registry("backend", attribute="backend", modules=MODULES, package=__package__)
# the most ranks any backend starts, and what --ranks allows
MAX_RANKS = 4096


@dataclass
class LaunchSpec:
    """How to start ranks on a realised topology.

    ``intent`` is what to start, whatever the MPI (a launcher flavour renders it); ``env`` is added
    to the launcher's environment; ``expected_placement[i]`` is what rank i must see of itself
    (hostname, address, cpus: checked on the rank); ``placement_labels[i]`` is what the topology
    says of rank i (vm, switch, ...), merged into the record's placement; ``notes`` are facts the
    record keeps (oversubscribed, yield_when_idle and why).
    """

    intent: Intent
    env: dict[str, str] = field(default_factory=dict)
    expected_placement: list[dict] | None = None
    placement_labels: list[dict] | None = None
    notes: dict = field(default_factory=dict)
    # when set, ``starter(launcher, program)`` is the argv that starts the ranks instead of the MPI's own
    # launcher (the slurm backend's srun with the site's PMI), or None for the MPI's own; it notes in
    # ``notes`` what it chose
    starter: Callable[[object, list[str]], list[str]] | None = None

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


class Realised(ABC):
    """A topology that is up and can launch ranks; a context manager that closes on exit.

    The runtime (runner, sweep, exec, topology commands) uses only what is declared here.
    """

    backend = "abstract"
    brought_up = False  # True when this object brought the topology up (and close() takes it down)

    def __init__(self, topology):
        self.topology = topology

    # ---- before bring-up (on the loaded topology) ----------------------------------------

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
    def batch(cls, topology) -> str | None:
        """The runtime module (``vnetbench.NAME``, with ``run`` and ``sweep``) that submits runs on
        ``topology`` as a scheduler's batch jobs instead of bringing it up in this process, or None.
        Named, not imported: a backend does not import the runtime."""
        return None

    @classmethod
    def preview(cls, topology) -> dict:
        """What ``topology show --json`` adds to the spec: the topology as this host would realise it."""
        return {}

    @classmethod
    def show(cls, topology, preview: dict) -> list:
        """``topology show``'s text below its title: lines (str) and tables ((headers, rows))."""
        return [f"backend {cls.backend}"]

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

    def close(self) -> None:
        """Tear down what this object brought up (nothing, for a topology that was already up)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def idle_vms(vms: int, ranks: int) -> str | None:
    """``cannot_place`` of a backend whose ``vms`` VMs must each get a rank."""
    if vms and ranks < vms:
        return f"{ranks} rank(s) for {vms} VMs would leave a VM idle; use at least {vms} ranks"
    return None


# ``@register("name")`` on a class: the backend called ``name`` (which must be listed in MODULES)
register = _BACKENDS.register
names = _BACKENDS.names


def backend(name: str, what: str = "backend") -> type[Realised]:
    """The class of the backend called ``name``; UsageError naming the ones available."""
    return _BACKENDS.get(name, what)
