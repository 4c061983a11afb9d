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
    launcher: auto       # auto, srun or mpirun: what starts the ranks (below)

Outside an allocation, ``run`` submits a batch job (``vnetbench.slurmjobs``); inside one (``salloc``,
a batch script: ``SLURM_JOB_ID`` is set) this backend uses the allocation's nodes without submitting.

The ranks are started the way a site does: ``launcher: srun`` (or ``@srun`` after a ``slurm:`` name, as in
``slurm:batch/2nodes-2switches@srun``) starts them with ``srun --mpi=PMI``, the PMI the MPI's library
speaks (Open MPI 4 and 5: pmix, MPICH and Intel MPI: pmi2), refused before anything starts when
``srun --mpi=list`` does not offer it; ``mpirun`` has the MPI's own launcher find the allocation through its
Slurm support; ``auto`` (the default) is srun when the site offers the MPI's PMI, else mpirun. The record's
``launch.notes.launcher`` says which ran. Slurm's commands are run with argv lists; what they print is
parsed here.
"""

import functools
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from vnetbench.errors import UsageError

from .base import LaunchSpec, Realised, register
from .intent import Intent, tcp_transport

REF = "slurm:"
FIELDS = {"name", "backend", "description", "partition", "nodes", "switches", "time_limit", "account", "qos",
          "launcher"}
LAUNCHERS = ("auto", "srun", "mpirun")
_LAYOUT = re.compile(r"(?P<nodes>\d+)nodes?-(?P<switches>\d+)switch(?:es)?")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_TIME = re.compile(r"(\d+-)?\d+(:\d{1,2}){0,2}")
COMMAND_TIMEOUT = 20.0


def slurm_cmd(*argv: str, timeout: float = COMMAND_TIMEOUT, check: bool = True) -> str:
    """Run a Slurm command (argv list, environment as is: SLURM_CONF chooses the cluster); its stdout."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise UsageError(f"--topology slurm: {argv[0]} is not installed (Slurm's client commands are needed)") \
            from None
    except subprocess.TimeoutExpired:
        raise UsageError(f"--topology slurm: {' '.join(argv)} did not answer in {timeout:g} s") from None
    if check and done.returncode != 0:
        raise UsageError(f"--topology slurm: {' '.join(argv)} failed: {done.stderr.strip()[-300:]}")
    return done.stdout


def hostnames(expr: str) -> list[str]:
    """A Slurm hostlist expression (``n[0-3],m1``) as names."""
    return slurm_cmd("scontrol", "show", "hostnames", expr).split() if expr else []


def in_allocation() -> bool:
    return bool(os.environ.get("SLURM_JOB_ID") and os.environ.get("SLURM_JOB_NODELIST"))


@dataclass
class SlurmTopology:
    """What the user asked for; ``layout()`` checks it against the partition."""

    name: str
    partition: str
    nodes: int | None = None
    switches: int | None = None
    time_limit: str | None = None
    account: str | None = None
    qos: str | None = None
    launcher: str = "auto"
    description: str = ""
    source: str = "<slurm>"
    backend = "slurm"
    vms = hosts = ()
    scaled: dict = field(default_factory=dict)

    @property
    def ref(self) -> str:
        """What to pass as --topology to get this topology again (a job's own vnetbench does)."""
        if self.source.startswith(REF) or not Path(self.source).is_file():
            return self.source
        return str(Path(self.source).resolve())

    def to_dict(self) -> dict:
        data = {"name": self.name, "backend": "slurm", "partition": self.partition}
        for key in ("nodes", "switches", "time_limit", "account", "qos", "description"):
            if getattr(self, key):
                data[key] = getattr(self, key)
        if self.launcher != "auto":
            data["launcher"] = self.launcher
        return data

    def node_count(self, ranks: int) -> int:
        return self.nodes or ranks

    def sbatch_options(self) -> list[str]:
        """Options passed through to sbatch (and salloc) as they are."""
        args = [f"--partition={self.partition}"]
        for key, opt in (("time_limit", "--time"), ("account", "--account"), ("qos", "--qos")):
            if getattr(self, key):
                args.append(f"{opt}={getattr(self, key)}")
        return args


def is_slurm(ref: str) -> bool:
    """``ref`` names a Slurm topology (``slurm:...`` or a YAML file saying ``backend: slurm``)."""
    if ref.startswith(REF):
        return True
    path = Path(ref)
    if ref.endswith((".yaml", ".yml")) and path.is_file():
        try:
            head = path.read_text(errors="replace")[:65536]
        except OSError:
            return False
        return re.search(r"^backend:\s*['\"]?slurm['\"]?\s*$", head, re.M) is not None
    return False


def load(ref: str, what: str = "--topology") -> SlurmTopology:
    if ref.startswith(REF):
        return parse_ref(ref, what)
    import yaml

    try:
        data = yaml.safe_load(Path(ref).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"{what}: {ref}: not readable as YAML ({str(exc).splitlines()[0]})") from None
    return from_dict(data, source=ref)


def parse_ref(ref: str, what: str = "--topology") -> SlurmTopology:
    rest = ref[len(REF):]
    rest, at, launcher = rest.partition("@")
    if at and launcher not in LAUNCHERS:
        raise UsageError(f"{what}: {ref!r}: launcher {launcher!r} is not allowed; after '@' give "
                         f"{', '.join(LAUNCHERS)}")
    partition, _, layout = rest.partition("/")
    if not _NAME.fullmatch(partition or ""):
        raise UsageError(f"{what}: {ref!r}: expected slurm:PARTITION[/Nnodes-1switch|/Nnodes-Nswitches]"
                         f"[@auto|@srun|@mpirun], PARTITION a Slurm partition name")
    nodes = switches = None
    if layout:
        match = _LAYOUT.fullmatch(layout)
        if not match:
            raise UsageError(f"{what}: {ref!r}: layout {layout!r} is not allowed; use Nnodes-1switch (N nodes "
                             f"under one leaf switch) or Nnodes-Nswitches (one node under each of N leaf switches)")
        nodes, switches = int(match["nodes"]), int(match["switches"])
        if switches not in (1, nodes):
            raise UsageError(f"{what}: {ref!r}: {switches} switches for {nodes} nodes; allowed: 1 or {nodes} "
                             f"(a YAML topology may spread nodes over other counts)")
    name = f"slurm-{rest.replace('/', '-')}" + (f"-{launcher}" if at else "")
    return check(SlurmTopology(name=name, partition=partition, nodes=nodes, switches=switches,
                               launcher=launcher or "auto", source=ref), ref)


def from_dict(data, source: str = "<slurm>") -> SlurmTopology:
    if not isinstance(data, dict):
        raise UsageError(f"{source}: expected a mapping (name, backend: slurm, partition, nodes, switches, ...)")
    unknown = sorted(set(data) - FIELDS)
    if unknown:
        raise UsageError(f"{source}: {unknown[0]}: unknown field of a slurm topology; allowed: "
                         f"{', '.join(sorted(FIELDS))}")
    for key in ("name", "partition"):
        if not isinstance(data.get(key), str) or not _NAME.fullmatch(data[key]):
            raise UsageError(f"{source}: {key}: missing or not a name (letters, digits, '_', '.', '-')")
    for key in ("nodes", "switches"):
        value = data.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 4096):
            raise UsageError(f"{source}: {key}: {value!r} is not allowed; a whole number from 1 to 4096")
    launcher = data.get("launcher", "auto")
    if launcher not in LAUNCHERS:
        raise UsageError(f"{source}: launcher: {launcher!r} is not allowed; allowed: {', '.join(LAUNCHERS)}")
    topology = SlurmTopology(name=data["name"], partition=data["partition"], nodes=data.get("nodes"),
                             switches=data.get("switches"), time_limit=_opt(data, "time_limit", source),
                             account=_opt(data, "account", source), qos=_opt(data, "qos", source), launcher=launcher,
                             description=str(data.get("description", "")), source=source)
    return check(topology, source)


def _opt(data: dict, key: str, source: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    value = str(value)
    if key == "time_limit" and not _TIME.fullmatch(value):
        raise UsageError(f"{source}: time_limit: {value!r} is not a Slurm time; allowed: MM, MM:SS, HH:MM:SS, "
                         f"D-HH[:MM[:SS]]")
    if key != "time_limit" and not _NAME.fullmatch(value):
        raise UsageError(f"{source}: {key}: {value!r} is not a Slurm name")
    return value


def check(topology: SlurmTopology, where: str) -> SlurmTopology:
    if topology.nodes and topology.switches and topology.switches > topology.nodes:
        raise UsageError(f"{where}: switches: {topology.switches} switches for {topology.nodes} nodes; "
                         f"allowed: 1 to {topology.nodes}")
    return topology


# ---- what the cluster has ------------------------------------------------------------------------

@dataclass
class Cluster:
    """A partition as Slurm describes it: nodes (name -> state, cpus, address) and leaf switches."""

    partition: str
    nodes: dict[str, dict]
    leaves: dict[str, list[str]]  # leaf switch -> its nodes in this partition
    version: str

    def usable(self) -> list[str]:
        bad = ("down", "drain", "fail", "unknown", "not_responding", "maint", "future")
        return [n for n, facts in self.nodes.items() if not any(b in facts["state"].lower() for b in bad)]

    def switch_of(self, node: str) -> str | None:
        return next((leaf for leaf, members in self.leaves.items() if node in members), None)

    def layout(self, nodes: int, switches: int | None) -> tuple[list[str], str | None]:
        """(sbatch options placing ``nodes`` nodes on ``switches`` leaf switches, None) or ([], why not)."""
        usable = self.usable()
        if nodes > len(usable):
            return [], (f"partition {self.partition} has {len(usable)} usable node(s) "
                        f"({len(self.nodes)} in all); {nodes} asked")
        if switches is None:
            return [f"--nodes={nodes}"], None
        if not self.leaves:
            return [], (f"partition {self.partition}: Slurm reports no switch topology "
                        f"(TopologyPlugin=topology/tree and topology.conf); cannot place nodes on switches")
        free = {leaf: [n for n in members if n in usable] for leaf, members in self.leaves.items()}
        ranked = sorted(free, key=lambda leaf: -len(free[leaf]))
        if switches == 1:
            if len(free[ranked[0]]) < nodes:
                return [], (f"partition {self.partition}: no leaf switch has {nodes} usable nodes "
                            f"({_shown(free)}); {nodes} nodes on 1 switch cannot be had")
            return [f"--nodes={nodes}", "--switches=1"], None
        chosen = [leaf for leaf in ranked if free[leaf]][:switches]
        if len(chosen) < switches:
            return [], (f"partition {self.partition} has {len(chosen)} leaf switch(es) with usable nodes "
                        f"({_shown(free)}); {nodes} nodes on {switches} switches cannot be had")
        picked, k = [], 0
        while len(picked) < nodes:  # round-robin over the chosen leaves
            leaf = chosen[k % switches]
            spare = [n for n in free[leaf] if n not in picked]
            if spare:
                picked.append(spare[0])
            elif all(not [n for n in free[c] if n not in picked] for c in chosen):
                return [], (f"partition {self.partition}: {switches} leaf switches hold fewer than {nodes} "
                            f"usable nodes ({_shown(free)})")
            k += 1
        return [f"--nodes={nodes}", f"--nodelist={','.join(picked)}"], None


def _shown(free: dict) -> str:
    return ", ".join(f"{leaf}: {len(nodes)} node(s)" for leaf, nodes in free.items())


@functools.cache
def version() -> str:
    """This site's Slurm version as its commands say it (Debian's: ``slurm-wlm 22.05.8``)."""
    return slurm_cmd("scontrol", "--version").strip()


def leaf_switches() -> dict[str, list[str]]:
    """Slurm's leaf switches (level 0 of ``scontrol show topology``) and their nodes; {} without topology/tree."""
    leaves = {}
    for line in slurm_cmd("scontrol", "show", "topology", check=False).splitlines():
        fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
        if fields.get("Level") == "0" and "SwitchName" in fields:
            leaves[fields["SwitchName"]] = hostnames(fields.get("Nodes", ""))
    return leaves


def spanned(nodes: list[str], leaves: dict[str, list[str]]) -> list[str]:
    """The leaf switches ``nodes`` sit under."""
    return sorted({leaf for leaf, members in leaves.items() if set(members) & set(nodes)})


def job_facts(job_id: str, nodes: list[str], partition: str, slurm_version: str | None,
              leaves: dict[str, list[str]]) -> dict:
    """A record's ``topology.slurm``: the job that ran it, its nodes, Slurm's version, the partition and
    the leaf switches the nodes span (one home for ok records and the failures a batch job leaves)."""
    return {"job_id": job_id, "nodes": nodes, "version": slurm_version, "partition": partition,
            "switches": spanned(nodes, leaves)}


def discover(partition: str) -> Cluster:
    """The partition's nodes and leaf switches, from sinfo and ``scontrol show topology``."""
    out = slurm_cmd("sinfo", "-h", "-N", "-p", partition, "-o", "%N|%T|%c|%o")
    nodes = {}
    for line in out.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 4:
            nodes[parts[0]] = {"state": parts[1], "cpus": int(parts[2]), "address": parts[3]}
    if not nodes:
        names = slurm_cmd("sinfo", "-h", "-o", "%R").split()
        raise UsageError(f"--topology slurm:{partition}: no such partition, or it has no nodes; "
                         f"partitions: {', '.join(names) or 'none'}")
    leaves = {leaf: [n for n in members if n in nodes] for leaf, members in leaf_switches().items()}
    return Cluster(partition=partition, nodes=nodes, leaves={leaf: m for leaf, m in leaves.items() if m},
                   version=version())


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


def srun_argv(intent: Intent, pmi: str, nodes: list[str], program: list[str], family: str) -> list[str]:
    """srun starting ``intent.ranks`` ranks round-robin over ``nodes`` of this allocation with ``pmi``.

    Open MPI's settings (``--mca``) go as OMPI_MCA_* through ``env`` (srun's --export splits values at
    commas: btl=self,sm,tcp); other MPIs have none."""
    bind = "cores" if intent.bind == "core" else "none"
    mca = [f"OMPI_MCA_{key}={value}" for key, value in intent.mca.items()] if family == "openmpi" else []
    return ["srun", f"--mpi={pmi}", f"--ntasks={intent.ranks}", f"--nodes={len(nodes)}",
            f"--nodelist={','.join(nodes)}", "--distribution=cyclic", f"--cpu-bind={bind}", "--kill-on-bad-exit=1",
            *(["env", *mca] if mca else []), *program]


def per_node(counts: str) -> list[int]:
    """Slurm's per-node counts (``2(x3),1``) one by one: [2, 2, 2, 1]."""
    out = []
    for item in filter(None, counts.split(",")):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", item.strip())
        if not match:
            return []
        out += [int(match[1])] * int(match[2] or 1)
    return out


def allocation() -> dict:
    """The allocation this process runs in: job id, nodes, the CPUs it holds on each."""
    nodes = hostnames(os.environ["SLURM_JOB_NODELIST"])
    cpus = per_node(os.environ.get("SLURM_JOB_CPUS_PER_NODE", ""))
    return {"job_id": os.environ["SLURM_JOB_ID"], "nodes": nodes,
            "cpus": cpus if len(cpus) == len(nodes) else None,
            "partition": os.environ.get("SLURM_JOB_PARTITION", "")}


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


@register("slurm")
class SlurmRealised(Realised):
    """Inside an allocation: its nodes; ranks started by srun with the MPI's PMI, or by the MPI's own launcher
    through its Slurm support (the topology's ``launcher``)."""

    @classmethod
    def check_launcher(cls, topology, launcher) -> None:
        step_launcher(topology.launcher, launcher)

    @classmethod
    def batch(cls, topology) -> str | None:
        # inside an allocation its nodes are used at once; outside, batch jobs run what was asked
        return None if in_allocation() else "vnetbench.slurmjobs"

    @classmethod
    def preview(cls, topology) -> dict:
        return {"slurm": preview(topology)}

    @classmethod
    def show(cls, topology, preview: dict) -> list:
        return preview_lines(preview["slurm"])

    @classmethod
    def load(cls, ref: str, what: str = "--topology"):
        return load(ref, what)

    @classmethod
    def from_data(cls, data: dict, source: str, lines=None):
        return from_dict(data, source=source)

    @classmethod
    def check_hosts(cls, topology, *, venv, timeout, clock_tolerance, mpi):
        from vnetbench import slurmcheck  # (moves into this backend)

        return slurmcheck.check(topology.partition, venv=venv, timeout=timeout, clock_tolerance=clock_tolerance,
                                mpi=mpi)

    def __init__(self, topology):
        super().__init__(topology)
        if not in_allocation():
            # run and sweep submit batch jobs instead (vnetbench.slurmjobs); exec needs the allocation
            raise UsageError(f"topology {topology.name}: not inside a Slurm allocation; 'run' and 'sweep' "
                             f"submit batch jobs, other commands need one (salloc -p {topology.partition} ...)")
        self.alloc = allocation()
        self.cluster = discover(topology.partition)
        check_allocation(topology, self.alloc, self.cluster)

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
        order = cyclic(self.alloc["nodes"], self.cpus(), ranks)
        effective = bind or "none"
        mca = tcp_transport()
        # the hosts named with their ranks' count: an MPI's own launcher maps round-robin only over named hosts
        hosts = [(n, order.count(n)) for n in sorted(set(order), key=order.index)]
        intent = Intent(ranks=ranks, hosts=hosts, map_by="node", bind=effective, mca=mca)
        labels = [{"host": n, "vm": n, "switch": self.cluster.switch_of(n),
                   "address": self.cluster.nodes.get(n, {}).get("address")} for n in order]
        expected = [{"hostname": n} for n in order]
        notes = {"bind": effective, "oversubscribed": False, "slurm_job": self.alloc["job_id"],
                 "hosts": len(set(order)), "launcher": self.topology.launcher}
        used = [host for host, _ in hosts]

        def starter(mpi, program):
            chosen, pmi = step_launcher(self.topology.launcher, mpi)
            notes["launcher"] = f"srun --mpi={pmi}" if pmi else "mpirun"
            # None: the MPI's own launcher, finding the allocation through its Slurm support
            return srun_argv(intent, pmi, used, program, mpi.family) if pmi else None

        return LaunchSpec(intent=intent, expected_placement=expected, placement_labels=labels, notes=notes,
                          starter=starter)

    def describe(self) -> dict:
        described = super().describe()
        described["slurm"] = job_facts(self.alloc["job_id"], self.alloc["nodes"],
                                       self.alloc["partition"] or self.topology.partition, self.cluster.version,
                                       self.cluster.leaves)
        return described


def check_allocation(topology: SlurmTopology, alloc: dict, cluster: Cluster) -> None:
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


def preview(topology: SlurmTopology) -> dict:
    """What ``topology show`` says: the partition's nodes and leaf switches, and whether the layout fits."""
    cluster = discover(topology.partition)
    nodes = topology.nodes or len(cluster.usable())
    placing, why = cluster.layout(nodes, topology.switches)
    return {"partition": topology.partition, "version": cluster.version,
            "nodes": [{"name": n, **facts, "switch": cluster.switch_of(n)} for n, facts in cluster.nodes.items()],
            "switches": cluster.leaves, "layout": {"nodes": nodes, "switches": topology.switches,
                                                   "sbatch": placing, "refused": why}}


def preview_lines(shown: dict) -> list:
    """``preview`` as the lines (and the node table) of ``topology show``."""
    layout = shown["layout"]
    lines = [f"backend slurm ({shown['version']}), partition {shown['partition']}: {len(shown['nodes'])} node(s), "
             f"{len(shown['switches'])} leaf switch(es)"]
    lines.append((["NODE", "SWITCH", "STATE", "CPUS", "ADDRESS"],
                  [[n["name"], n["switch"] or "-", n["state"], n["cpus"], n["address"]] for n in shown["nodes"]]))
    for leaf, members in shown["switches"].items():
        lines.append(f"switch {leaf}: {', '.join(members)}")
    asked = f"{layout['nodes']} node(s)" + (f" on {layout['switches']} switch(es)" if layout["switches"] else "")
    lines.append(f"layout {asked}: " + (f"refused: {layout['refused']}" if layout["refused"]
                                        else "sbatch " + " ".join(layout["sbatch"])))
    return lines
