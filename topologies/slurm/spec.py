"""The Slurm topology: what a user asks of a partition (a ``slurm:...`` ref or YAML ``backend: slurm``), validated.

A ref is ``slurm:PARTITION[/Nnodes-1switch|/Nnodes-Nswitches][@auto|@srun|@mpirun]``; a YAML topology has the
fields of ``SlurmTopology``. Both become the same frozen model; a YAML file's problems are reported by
``topologies.model.validation`` as every spec's are: ``FILE:LINE: field: what is allowed``.
"""

import re
from pathlib import Path
from typing import Annotated, ClassVar

from pydantic import BaseModel, ConfigDict, PlainValidator, PrivateAttr

from vnetbench.core.errors import SpecError, UsageError

from ..model import validation

REF = "slurm:"
LAUNCHERS = ("auto", "srun", "mpirun")
MAX_NODES = 4096
_LAYOUT = re.compile(r"(?P<nodes>\d+)nodes?-(?P<switches>\d+)switch(?:es)?")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_TIME = re.compile(r"(\d+-)?\d+(:\d{1,2}){0,2}")


def _name(value):
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise ValueError(f"{value!r} is not a name (letters, digits, '_', '.', '-')")
    return value


def _count(value):
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_NODES:
        raise ValueError(f"{value!r} is not allowed; a whole number from 1 to {MAX_NODES}")
    return value


def _time(value):
    # YAML reads 10 as a number; Slurm takes it as minutes, as it would the text
    text = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
    if text is None or not _TIME.fullmatch(text):
        raise ValueError(f"{str(value)!r} is not a Slurm time; allowed: MM, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]")
    return text


def _slurm_name(value):
    text = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
    if text is None or not _NAME.fullmatch(text):
        raise ValueError(f"{str(value)!r} is not a Slurm name")
    return text


def _launcher(value):
    if value not in LAUNCHERS:
        raise ValueError(f"{value!r} is not allowed; allowed: {', '.join(LAUNCHERS)}")
    return value


def _backend(value):
    if value != "slurm":
        raise ValueError(f"expected 'slurm', got {value!r}")
    return value


def _text(value):
    if isinstance(value, (dict, list)) or len(str(value)) > 500:
        raise ValueError("expected text of at most 500 characters")
    return str(value)


Name = Annotated[str, PlainValidator(_name)]
Count = Annotated[int, PlainValidator(_count)]


class SlurmTopology(BaseModel):
    """What the user asked for; the partition's ``Cluster.layout`` says whether Slurm can give it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Name
    backend: Annotated[str, PlainValidator(_backend)] = "slurm"
    description: Annotated[str, PlainValidator(_text)] = ""
    partition: Name
    nodes: Count | None = None
    switches: Count | None = None  # leaf switches the nodes span (1: all under one switch)
    time_limit: Annotated[str, PlainValidator(_time)] | None = None  # sbatch --time
    account: Annotated[str, PlainValidator(_slurm_name)] | None = None
    qos: Annotated[str, PlainValidator(_slurm_name)] | None = None
    launcher: Annotated[str, PlainValidator(_launcher)] = "auto"  # what starts the ranks: auto, srun, mpirun
    _source: str = PrivateAttr("<slurm>")

    # what the runtime asks of any topology: this one has neither VMs nor hosts of its own
    vms: ClassVar[tuple] = ()
    hosts: ClassVar[tuple] = ()

    @property
    def source(self) -> str:
        return self._source

    @property
    def ref(self) -> str:
        """What to pass as --topology to get this topology again (a batch job's own vnetbench does)."""
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


def _made(topology: SlurmTopology, source: str) -> SlurmTopology:
    topology._source = source
    return topology


def parse_ref(ref: str, what: str = "--topology") -> SlurmTopology:
    """``slurm:PARTITION[/LAYOUT][@LAUNCHER]``; UsageError naming ``what`` and what is allowed."""
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
        if not 1 <= nodes <= MAX_NODES:
            raise UsageError(f"{what}: {ref!r}: {nodes} nodes; allowed: 1 to {MAX_NODES}")
        if switches not in (1, nodes):
            raise UsageError(f"{what}: {ref!r}: {switches} switches for {nodes} nodes; allowed: 1 or {nodes} "
                             f"(a YAML topology may spread nodes over other counts)")
    name = f"slurm-{rest.replace('/', '-')}" + (f"-{launcher}" if at else "")
    # every part is checked above; the name made of them may be longer than a YAML name may be
    return _made(SlurmTopology.model_construct(name=name, partition=partition, nodes=nodes, switches=switches,
                                               launcher=launcher or "auto"), ref)


def from_dict(data, source: str = "<slurm>", lines=None) -> SlurmTopology:
    """A YAML topology saying ``backend: slurm`` (``lines`` locate its fields); SpecError: FILE:LINE: field: what."""
    if not isinstance(data, dict):
        raise SpecError(f"{source}: expected a mapping (name, backend: slurm, partition, nodes, switches, ...)")
    if isinstance(data.get("time_limit"), int):
        data = {**data, "time_limit": _as_written(lines, "time_limit", data["time_limit"])}
    topology = validation.validated(SlurmTopology, data, source, lines)
    if topology.nodes and topology.switches and topology.switches > topology.nodes:
        raise SpecError(validation.report(source, lines, [(("switches",), (
            f"{topology.switches} switches for {topology.nodes} nodes; allowed: 1 to {topology.nodes}"))]))
    return _made(topology, source)


def _as_written(lines, key: str, value):
    """The top-level ``key``'s scalar as the file wrote it: YAML 1.1 reads an unquoted ``10:00`` as the number 600
    (base 60), which Slurm would take as 600 minutes."""
    import yaml

    node = getattr(lines, "node", None)
    if isinstance(node, yaml.MappingNode):
        for name, scalar in node.value:
            if getattr(name, "value", None) == key and isinstance(scalar, yaml.ScalarNode):
                return scalar.value
    return value
