"""Inside a Slurm allocation: its nodes and CPUs, where each rank goes, and what starts the ranks (srun or mpirun).

``launcher: srun`` starts ranks with ``srun --mpi=PMI``, the PMI the MPI's library speaks, refused before anything
starts when ``srun --mpi=list`` does not offer it; ``mpirun`` has the MPI's own launcher find the allocation through
its Slurm support; ``auto`` is srun when the site offers the MPI's PMI, else mpirun.
"""

import functools
import os
import re

from vnetbench.core.errors import UsageError

from ..launch.intent import Intent
from .cluster import Cluster, hostnames, slurm_cmd, spanned


def in_allocation() -> bool:
    return bool(os.environ.get("SLURM_JOB_ID") and os.environ.get("SLURM_JOB_NODELIST"))


def current() -> dict:
    """The allocation this process runs in: job id, nodes, the CPUs it holds on each."""
    nodes = hostnames(os.environ["SLURM_JOB_NODELIST"])
    cpus = per_node(os.environ.get("SLURM_JOB_CPUS_PER_NODE", ""))
    return {"job_id": os.environ["SLURM_JOB_ID"], "nodes": nodes,
            "cpus": cpus if len(cpus) == len(nodes) else None,
            "partition": os.environ.get("SLURM_JOB_PARTITION", "")}


def per_node(counts: str) -> list[int]:
    """Slurm's per-node counts (``2(x3),1``) one by one: [2, 2, 2, 1]."""
    out = []
    for item in filter(None, counts.split(",")):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", item.strip())
        if not match:
            return []
        out += [int(match[1])] * int(match[2] or 1)
    return out


def cyclic(nodes: list[str], cpus: list[int], ranks: int) -> list[str]:
    """The node of each rank, round-robin over ``nodes`` skipping those whose ``cpus`` are taken (what
    ``srun --distribution=cyclic`` does in an allocation): 3 ranks on 2 CPUs + 1 CPU -> a, b, a."""
    order, room = [], list(cpus)
    while len(order) < ranks and any(room):
        for k, node in enumerate(nodes):
            if len(order) < ranks and room[k] > 0:
                order.append(node)
                room[k] -= 1
    return order


def check_layout(topology, alloc: dict, cluster: Cluster) -> None:
    """UsageError when the allocation is not the layout the topology names (its node count, the leaf
    switches its nodes span): a record named ...-2nodes-2switches must not come from one switch."""
    nodes = alloc["nodes"]
    span = spanned(nodes, cluster.leaves)
    wrong_nodes = topology.nodes is not None and len(nodes) != topology.nodes
    wrong_switches = topology.switches is not None and len(span) != topology.switches
    if wrong_nodes or wrong_switches:
        asked = " on ".join(filter(None, [f"{topology.nodes} node(s)" if topology.nodes else "",
                                          f"{topology.switches} leaf switch(es)" if topology.switches else ""]))
        has = f"{len(nodes)} node(s) on {len(span)} leaf switch(es)" + (f" ({', '.join(span)})" if span else "")
        raise UsageError(f"topology {topology.name} asks for {asked}; allocation {alloc['job_id']} has {has}: "
                         f"{', '.join(nodes)}")


# ---- what starts the ranks -----------------------------------------------------------------------

@functools.cache
def site_pmis() -> frozenset[str]:
    """The PMI types this site's srun offers (``srun --mpi=list``: pmix, pmix_v4, pmi2, ...)."""
    out = slurm_cmd("srun", "--mpi=list", check=False)
    names = set()
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("specific pmix plugin versions available:"):
            names.update(v.strip() for v in line.split(":", 1)[1].split(","))
        elif line and " " not in line:
            names.add(line)
    return frozenset(names)


def step_launcher(requested: str, mpi) -> tuple[str, str | None]:
    """("srun", PMI) or ("mpirun", None): what starts ranks of ``mpi`` (a flavours.Launcher) when the
    topology asks for ``requested`` (auto, srun, mpirun); UsageError for srun the site cannot do."""
    if requested == "mpirun":
        return "mpirun", None
    pmi = getattr(mpi, "pmi", None)
    offered = site_pmis() if pmi else frozenset()
    if pmi and pmi in offered:
        return "srun", pmi
    if requested == "srun":
        why = (f"its library speaks {pmi} but srun --mpi=list offers {', '.join(sorted(offered)) or 'nothing'}"
               if pmi else "vnetbench knows no PMI srun could start it with")
        raise UsageError(f"launcher: srun cannot start {mpi} ranks on this site: {why}; use launcher: mpirun "
                         f"(or @mpirun)")
    return "mpirun", None


# Slurm's PMIx plugin runs a fence that carries no data (MPI_Init's barriers) as a tree over the step's nodes
# ("mixed", its default: the ring only for fences with data). With fewer nodes than TreeWidth (50 by default),
# reverse_tree_info makes every node a root without children (Slurm 20.11 on; still so in its main branch,
# 26.11, August 2026): each node leaves the barrier on its own, and a rank that left MPI_Init sends to a peer
# still before its MPI_COMM_WORLD is in the PML - Open MPI 5's ob1 then crashes in MPI_Init
# (mca_pml_ob1_recv_frag_callback_match; on this project's Slurm tier now and then under load, and slurmd's
# debug log shows each node's tree fence done without a message). The ring passes every node's
# contribution round, data or none: a real barrier.
PMIX_FENCE = "SLURM_PMIX_FENCE"


def srun_argv(intent: Intent, pmi: str, nodes: list[str], program: list[str], mca: dict[str, str],
              environ=os.environ) -> list[str]:
    """srun starting ``intent.ranks`` ranks round-robin over ``nodes`` of this allocation with ``pmi``.

    ``mca`` is the intent's Open MPI settings as the MPI's ranks name them (``Launcher.rank_mca``; empty for
    other MPIs): they go as OMPI_MCA_* through ``env`` (srun's --export splits values at commas:
    btl=self,sm,tcp). With PMIx, srun runs with SLURM_PMIX_FENCE=ring unless ``environ`` (the user's) names a
    fence: the step's barriers then hold across nodes (PMIX_FENCE says why)."""
    bind = "cores" if intent.bind == "core" else "none"
    settings = [f"OMPI_MCA_{key}={value}" for key, value in mca.items()]
    fence = pmix_fence(pmi, environ)
    setting = ["env", f"{PMIX_FENCE}={fence}"] if fence and not environ.get(PMIX_FENCE) else []
    return [*setting, "srun", f"--mpi={pmi}", f"--ntasks={intent.ranks}", f"--nodes={len(nodes)}",
            f"--nodelist={','.join(nodes)}", "--distribution=cyclic", f"--cpu-bind={bind}", "--kill-on-bad-exit=1",
            *(["env", *settings] if settings else []), *program]


def pmix_fence(pmi: str | None, environ=os.environ) -> str | None:
    """The fence algorithm a step started with ``pmi`` uses: the user's SLURM_PMIX_FENCE, else (unset or empty)
    ring for PMIx (PMIX_FENCE says why); None for other PMIs."""
    if not (pmi or "").startswith("pmix"):
        return None
    return environ.get(PMIX_FENCE) or "ring"

