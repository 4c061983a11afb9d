"""A backend's launch intent (hosts and slots, agent, subnet, binding), and its one rendering in Open MPI 5 syntax.

Backends say what they want started, whatever the MPI; a launcher flavour (vnetbench.mpi.flavours) turns the
intent into its own argv. ``prrte_args`` is the Open MPI 5 (PRRTE) rendering: the default launcher's,
and the arguments a record shows. This module imports nothing of vnetbench: every layer may use it.
"""

import os

# what a VM's one network interface is called inside its namespace (netns backend)
VM_IFACE = "eth0"


class Intent:
    """What a backend wants started, whatever the MPI: ``ranks`` ranks on ``hosts`` ((name, slots); None
    for this host alone) or a ``hostfile`` (Open MPI syntax), filled ``slot`` by slot or round-robin by
    ``node``, bound or not, through a launch ``agent`` (a command used instead of ssh, with ``ssh_args``),
    with TCP and out-of-band traffic on ``subnet`` (and, inside emulated VMs, on ``iface``); ``mca``: Open
    MPI's MPI-layer settings (--mca), ``prte``: PRRTE settings not stated above, ``source``: the Open MPI 5
    arguments it was read from, if any.

    A plain class, not a dataclass, as every class a run's start makes (``vnetbench.cli`` says why)."""

    def __init__(self, ranks: int, hosts: list[tuple[str, int]] | None = None, hostfile: str | None = None,
                 map_by: str = "slot", bind: str | None = None, oversubscribe: bool = False,
                 agent: str | None = None, ssh_args: str | None = None, subnet: str | None = None,
                 iface: str | None = None, prefix: str | None = None, mca: dict[str, str] | None = None,
                 prte: dict[str, str] | None = None, source: list[str] | None = None):
        self.ranks, self.hosts, self.hostfile, self.map_by, self.bind = ranks, hosts, hostfile, map_by, bind
        self.oversubscribe, self.agent, self.ssh_args = oversubscribe, agent, ssh_args
        self.subnet, self.iface, self.prefix = subnet, iface, prefix
        self.mca = {} if mca is None else mca
        self.prte = {} if prte is None else prte
        self.source = [] if source is None else source

    def __repr__(self) -> str:
        return f"Intent({vars(self)})"

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    @property
    def yield_when_idle(self) -> bool:
        return self.mca.get("mpi_yield_when_idle") == "1"

    def prte_settings(self) -> dict[str, str]:
        """Every PRRTE setting (--prtemca) the intent means, by PRRTE's names."""
        settings = {}
        if self.agent:
            settings["plm_ssh_agent"] = self.agent
        if self.ssh_args:
            settings["plm_ssh_args"] = self.ssh_args
        settings.update(self.prte)
        if self.subnet:
            settings["prte_if_include"] = self.subnet
        return settings

    def recorded_mca(self) -> dict[str, str]:
        """The record's ``launch.mca``: the MPI settings, and PRRTE's as ``prte:NAME``."""
        return {**self.mca, **{f"prte:{key}": value for key, value in self.prte_settings().items()}}


def tcp_transport(subnet: str | None = None) -> dict[str, str]:
    """Open MPI's MPI-layer settings of ranks spread over hosts or VMs: the ob1 PML over TCP (and shared
    memory between ranks of one host or VM), kept on ``subnet`` when given, no UCX one-sided (it would pick
    a transport of its own). The one home of these settings for every backend; other flavours read
    ``Intent.subnet``/``iface`` instead."""
    mca = {"pml": "ob1", "btl": "self,sm,tcp"}
    if subnet:
        mca["btl_tcp_if_include"] = subnet
    mca["osc"] = "^ucx"
    return mca


def one_host_transport() -> dict[str, str]:
    """Open MPI's MPI-layer settings of ranks that all run on this host: every transport but libfabric's BTL,
    which carries nothing between ranks of one host (shared memory does) and costs Open MPI 5 about a second
    in every rank's MPI_Init on a host without a fabric (its component close sleeps a second: seen with gdb
    under the PyPI wheel's 5.0.11), and but TCP's, which carries nothing either and would have every rank
    listen on every interface of the host (0.0.0.0 and ::, seen with ss) for the whole run. Nothing when the
    user's environment chooses the BTLs itself."""
    return {} if "OMPI_MCA_btl" in os.environ else {"btl": "^ofi,tcp"}


def mca_args(mca: dict[str, str]) -> list[str]:
    args = []
    for key, value in mca.items():
        args += ["--mca", key, value]
    return args


def prrte_args(intent: Intent) -> list[str]:
    """The arguments between Open MPI 5's ``mpirun`` and the program that carry out ``intent``."""
    if intent.source:
        return list(intent.source)
    args = ["-n", str(intent.ranks)]
    if intent.hosts:
        args += ["--host", ",".join(f"{host}:{slots}" for host, slots in intent.hosts)]
    if intent.hostfile:
        args += ["--hostfile", intent.hostfile]
    over = ":OVERSUBSCRIBE" if intent.oversubscribe else ""
    if intent.hosts or intent.hostfile:
        args += ["--map-by", intent.map_by + over]
    elif over:
        args += ["--map-by", over]
    if intent.bind:
        args += ["--bind-to", intent.bind]
    if intent.prefix:
        args += ["--prefix", intent.prefix]
    for key, value in intent.prte_settings().items():
        args += ["--prtemca", key, value]
    return args + mca_args(intent.mca)
