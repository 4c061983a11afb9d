"""What a Slurm cluster has, as its own commands say: a partition's nodes and leaf switches, and the layouts they allow.

Slurm's commands are run with argv lists (the environment as is: SLURM_CONF chooses the cluster); what they
print is parsed here. ``topology show`` is this module's view of a partition (``preview``, ``preview_lines``).
"""

import functools
import subprocess
from dataclasses import dataclass

from vnetbench.core.errors import UsageError

COMMAND_TIMEOUT = 20.0
# node states Slurm will not start a job on
_UNUSABLE = ("down", "drain", "fail", "unknown", "not_responding", "maint", "future")


def slurm_cmd(*argv: str, timeout: float = COMMAND_TIMEOUT, check: bool = True) -> str:
    """Run a Slurm command; its stdout. UsageError when it is missing, does not answer, or fails (``check``)."""
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


@dataclass
class Cluster:
    """A partition as Slurm describes it: nodes (name -> state, cpus, address) and leaf switches."""

    partition: str
    nodes: dict[str, dict]
    leaves: dict[str, list[str]]  # leaf switch -> its nodes in this partition
    version: str

    def usable(self) -> list[str]:
        return [n for n, facts in self.nodes.items() if not any(b in facts["state"].lower() for b in _UNUSABLE)]

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


def preview(topology) -> dict:
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
