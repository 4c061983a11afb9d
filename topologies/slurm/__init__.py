"""The ``slurm`` backend: nodes from a Slurm partition, switches from Slurm's own topology (topology/tree).

A topology is named ``slurm:PARTITION`` (as many nodes as ranks, wherever Slurm puts them),
``slurm:PARTITION/Nnodes-1switch`` (N nodes under one leaf switch: the cluster's "1 vSwitch"),
``slurm:PARTITION/Nnodes-Nswitches`` (one node under each of N leaf switches: "N vSwitches"), or a YAML
file with ``backend: slurm``::

    name: two-leaves
    backend: slurm
    partition: batch
    nodes: 2
    switches: 2          # leaf switches the nodes span (1: all under one switch)
    time_limit: "10:00"  # sbatch --time
    account: proj42      # optional, passed through, as is qos
    qos: normal
    launcher: auto       # auto, srun or mpirun: what starts the ranks

Outside an allocation, runs are submitted as batch jobs (``batch``: a ``SlurmBatch``); inside one (``salloc``,
a batch script: ``SLURM_JOB_ID`` is set) the backend realises the topology as the allocation's nodes, refusing
an allocation that is not the layout the topology names, and starts no job.

The ranks are started the way a site does: ``launcher: srun`` (or ``@srun`` after a ``slurm:`` name, as in
``slurm:batch/2nodes-2switches@srun``) starts them with ``srun --mpi=PMI``, the PMI the MPI's library speaks
(Open MPI 4 and 5: pmix, MPICH and Intel MPI: pmi2), refused before anything starts when ``srun --mpi=list``
does not offer it; ``mpirun`` has the MPI's own launcher find the allocation through its Slurm support;
``auto`` (the default) is srun when the site offers the MPI's PMI, else mpirun. The record's
``launch.notes.launcher`` says which ran.

Its parts: ``spec`` (the topology, validated), ``cluster`` (what Slurm says of a partition: nodes, leaf
switches, layouts), ``allocation`` (inside one: nodes, placement, srun or mpirun), ``jobs`` (one batch job),
``ledger`` (a sweep's jobs, found again), ``batch`` (the ``Batch``), ``check`` (``hosts check`` through srun).
"""

from vnetbench.core.errors import UsageError

from ..base import Backend, LaunchSpec, register
from ..launch.intent import Intent, tcp_transport
from . import allocation, cluster, spec


@register("slurm")
class SlurmBackend(Backend):
    """Inside an allocation: its nodes; ranks started by srun with the MPI's PMI, or by the MPI's own launcher
    through its Slurm support (the topology's ``launcher``)."""

    # ---- refs and specs ------------------------------------------------------------------

    @classmethod
    def load(cls, ref: str, what: str = "--topology"):
        return spec.parse_ref(ref, what)

    @classmethod
    def from_data(cls, data: dict, source: str, lines=None):
        return spec.from_dict(data, source, lines)

    # ---- before bring-up -----------------------------------------------------------------

    @classmethod
    def check_launcher(cls, topology, launcher) -> None:
        allocation.step_launcher(topology.launcher, launcher)

    @classmethod
    def preview(cls, topology) -> dict:
        return {"slurm": cluster.preview(topology)}

    @classmethod
    def show(cls, topology, preview: dict) -> list:
        return cluster.preview_lines(preview["slurm"])

    # ---- hosts and batch -----------------------------------------------------------------

    @classmethod
    def check_hosts(cls, topology, *, venv, timeout, clock_tolerance, mpi):
        from .check import check

        return check(topology.partition, venv=venv, timeout=timeout, clock_tolerance=clock_tolerance, mpi=mpi)

    @classmethod
    def batch(cls, topology):
        # inside an allocation its nodes are used at once; outside, batch jobs run what was asked
        if allocation.in_allocation():
            return None
        from .batch import SlurmBatch

        return SlurmBatch()

    # ---- life: inside an allocation ------------------------------------------------------

    @classmethod
    def realise(cls, topology) -> "SlurmBackend":
        if not allocation.in_allocation():
            # run and sweep submit batch jobs instead (``batch``); exec needs the allocation
            raise UsageError(f"topology {topology.name}: not inside a Slurm allocation; 'run' and 'sweep' "
                             f"submit batch jobs, other commands need one (salloc -p {topology.partition} ...)")
        alloc = allocation.current()
        found = cluster.discover(topology.partition)
        allocation.check_layout(topology, alloc, found)
        return cls(topology, alloc, found)

    def __init__(self, topology, alloc: dict, found: cluster.Cluster):
        super().__init__(topology)
        self.alloc = alloc
        self.cluster = found

    def cpus(self) -> list[int]:
        """The CPUs the allocation holds on each of its nodes (else the nodes' own)."""
        return self.alloc["cpus"] or [self.cluster.nodes.get(n, {}).get("cpus", 1) for n in self.alloc["nodes"]]

    def check_ranks(self, ranks: int) -> None:
        cpus = sum(self.cpus())
        if ranks > cpus:
            raise UsageError(f"--ranks: {ranks} ranks on {cpus} cpus of allocation {self.alloc['job_id']}; "
                             f"allowed: 1 to {cpus}")

    def launch(self, ranks: int, bind: str | None = None) -> LaunchSpec:
        self.check_ranks(ranks)
        # round-robin over the allocation's nodes: with as many ranks as nodes, one rank per node, so that
        # a "2 switches" allocation puts its ranks under both switches; with more, rank i on node i mod N
        # while that node has CPUs left in the allocation
        order = allocation.cyclic(self.alloc["nodes"], self.cpus(), ranks)
        effective = bind or "none"
        # the hosts named with their ranks' count: an MPI's own launcher maps round-robin only over named hosts
        hosts = [(n, order.count(n)) for n in sorted(set(order), key=order.index)]
        intent = Intent(ranks=ranks, hosts=hosts, map_by="node", bind=effective, mca=tcp_transport())
        labels = [{"host": n, "vm": n, "switch": self.cluster.switch_of(n),
                   "address": self.cluster.nodes.get(n, {}).get("address")} for n in order]
        expected = [{"hostname": n} for n in order]
        notes = {"bind": effective, "oversubscribed": False, "slurm_job": self.alloc["job_id"],
                 "hosts": len(set(order)), "launcher": self.topology.launcher}
        used = [host for host, _ in hosts]

        def starter(mpi, program):
            _, pmi = allocation.step_launcher(self.topology.launcher, mpi)
            notes["launcher"] = f"srun --mpi={pmi}" if pmi else "mpirun"
            if fence := allocation.pmix_fence(pmi):  # the step's PMIx fences (allocation.PMIX_FENCE says why ring)
                notes["pmix_fence"] = fence
            # None: the MPI's own launcher, finding the allocation through its Slurm support
            return allocation.srun_argv(intent, pmi, used, program, mpi.rank_mca(intent)) if pmi else None

        return LaunchSpec(intent=intent, expected_placement=expected, placement_labels=labels, notes=notes,
                          starter=starter)

    def describe(self) -> dict:
        described = super().describe()
        described["slurm"] = cluster.job_facts(self.alloc["job_id"], self.alloc["nodes"],
                                               self.alloc["partition"] or self.topology.partition,
                                               self.cluster.version, self.cluster.leaves)
        return described
