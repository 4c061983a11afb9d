"""Records in: a store's sound records (streamed by ``Store.entries``), migrated to the current schema,
de-duplicated, and keyed by configuration.

A configuration is what makes two runs comparable: kernel, topology, ranks, every kernel
parameter, the binding the ranks ran with and the run options (memory policy, counters).
Sweep's ``--resume``, report's cells and compare's matching all use ``config_key``.
"""

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ..core import records as schema
from ..core.errors import UsageError
from ..core.store import BadLine, Store

# schema version v -> function turning a record of version v into one of version v + 1
MIGRATIONS: dict[int, Callable[[dict], dict]] = {}


def canonical(params) -> str:
    return json.dumps(params, sort_keys=True, separators=(",", ":"), default=str)


def identity(record: dict) -> tuple[str, int]:
    """(run id, repetition): one run's record, wherever it was stored or ingested."""
    return record["run_id"], record["repetition"]


def bind_of(record: dict) -> str | None:
    """The binding the ranks ran with (``launch.notes.bind``); None for direct launches."""
    launch = record.get("launch")
    notes = launch.get("notes") if isinstance(launch, dict) else None
    bind = notes.get("bind") if isinstance(notes, dict) else None
    return bind if isinstance(bind, str) else None


def topology_name(record: dict) -> str:
    """The topology's name, with its switches' kinds where they are not Linux bridges ('2vm-2vswitch-ovs
    (netdev)', 'mine (ovs system)'): different switches are different topologies, never pooled."""
    name = record["topology"].get("name")
    name = name if isinstance(name, str) else "?"
    switches = record["topology"].get("switches")
    kinds = sorted({" ".join(str(part) for part in (sw.get("kind"), sw.get("datapath")) if part)
                    for sw in switches if isinstance(sw, dict) and sw.get("kind") not in (None, "bridge")}) \
        if isinstance(switches, list) else []
    if not kinds:
        return name
    if len(kinds) == 1 and name.endswith("-" + kinds[0].split(" ")[0]):
        rest = kinds[0].partition(" ")[2]  # the twin's name says the kind already
        return f"{name} ({rest})" if rest else name
    return f"{name} ({', '.join(kinds)})"


def mpi_of(record: dict) -> str | None:
    """The MPI library the ranks loaded, as 'Open MPI 5.0.11' (``environment.versions.mpi``, read on a rank),
    else as the launch named it (``launch.mpi.library``); None when the record does not say."""
    environment = record.get("environment")
    versions = environment.get("versions") if isinstance(environment, dict) else None
    loaded = versions.get("mpi") if isinstance(versions, dict) else None
    if isinstance(loaded, str) and loaded:
        return loaded
    launch = record.get("launch")
    mpi = launch.get("mpi") if isinstance(launch, dict) else None
    library = mpi.get("library") if isinstance(mpi, dict) else None
    if isinstance(library, dict) and isinstance(library.get("product"), str):
        return f"{library['product']} {library.get('version') or ''}".strip()
    return None


def run_options_of(record: dict) -> dict:
    options = record.get("run_options")
    return options if isinstance(options, dict) else {}


class ConfigKey(NamedTuple):
    """What makes two runs comparable. Run options (memory policy, counters) change what a run
    measures, so they are part of it; params and run options are canonical JSON."""

    kernel: str
    topology: str
    ranks: int
    params: str
    bind: str | None
    run_options: str


def config_key(record: dict) -> ConfigKey:
    return ConfigKey(record["kernel"], topology_name(record), record["ranks"], canonical(record["params"]),
                     bind_of(record), canonical(run_options_of(record)))


def describe_key(key: ConfigKey, with_params: bool = False) -> str:
    text = f"{key.kernel} x{key.ranks} on {key.topology}" + (f", bind {key.bind}" if key.bind else "")
    if key.run_options != "{}":
        text += f", {key.run_options}"
    return f"{text} {key.params}" if with_params else text


@dataclass
class Skipped:
    line: int
    reason: str


@dataclass
class Loaded:
    path: Path
    records: list[dict]
    skipped: list[Skipped] = field(default_factory=list)
    migrated: int = 0
    duplicates: int = 0
    lines: dict[tuple, int] = field(default_factory=dict)  # identity -> line of the store (load() only)
    count: int = 0  # sound records read, duplicates left out
    not_ok: int = 0  # of which did not pass

    def ok(self) -> list[dict]:
        return [record for record in self.records if record["status"] == "ok"]

    def line_of(self, record: dict) -> int | None:
        return self.lines.get(identity(record))

    def warnings(self) -> list[str]:
        out = [f"{self.path}:{item.line}: skipped: {item.reason}" for item in self.skipped]
        if self.migrated:
            out.append(f"{self.path}: {self.migrated} record(s) migrated to schema version {schema.SCHEMA_VERSION}")
        if self.duplicates:
            out.append(f"{self.path}: {self.duplicates} duplicate record(s) (same run and repetition) ignored")
        return out


def stream(path, option: str = "--store", into: Loaded | None = None):
    """(line, record) for each sound record of the store, migrated and de-duplicated, a line at a time;
    what was skipped, migrated or a duplicate is counted in ``into`` (whose records stay as they are).

    UsageError naming ``option`` when the store is missing, not a regular file or of a newer schema.
    Holds no record: to tell a duplicate, only a 128-bit digest of each (run id, repetition) seen,
    about 70 bytes a record.
    """
    path = Path(path)
    loaded = into if into is not None else Loaded(path, [])
    seen: set[int] = set()
    for entry in Store(path).entries(option):
        if isinstance(entry, BadLine):
            _refuse_newer(path, entry, option)
            loaded.skipped.append(Skipped(entry.line, entry.reason))
            continue
        line, record = entry
        if record["schema_version"] < schema.SCHEMA_VERSION:
            record = migrate(record, path, option)
            loaded.migrated += 1
        digest = _digest(identity(record))
        if digest in seen:
            loaded.duplicates += 1
            continue
        seen.add(digest)
        loaded.count += 1
        loaded.not_ok += record["status"] != "ok"
        yield line, record


def _digest(key: tuple) -> int:
    # a digest, not the key: a run id is ~50 bytes; 128 bits make a false duplicate as unlikely as a git collision
    return int.from_bytes(hashlib.blake2b(canonical(key).encode(), digest_size=16).digest(), "little")


def load(path, option: str = "--store", keep: Callable[[dict], dict] | None = None) -> Loaded:
    """The store's sound records (see stream()), all held: for what shows each record. ``keep`` trims
    each record as it is read (what a caller does not need is never held for the whole store)."""
    loaded = Loaded(Path(path), [])
    for line, record in stream(path, option, loaded):
        loaded.lines[identity(record)] = line
        loaded.records.append(keep(record) if keep else record)
    return loaded


# the parts of a record that repeat from run to run of one configuration
SHARED_PARTS = ("topology", "params", "placement", "validation", "launch", "run_options")


def for_tables() -> Callable[[dict], dict]:
    """A ``keep`` for load(): each record without what no table, comparison or plot reads (the
    environment, the profile, the launch command, raw per-step and per-repetition samples: most of a halo or
    stream record's bytes), its repeating parts shared with earlier records that hold the same."""
    seen: dict[str, object] = {}

    def shared(value):
        key = json.dumps(value, sort_keys=True, separators=(",", ":"))
        return seen.setdefault(key, value)

    def slim(record: dict) -> dict:
        out = {key: value for key, value in record.items() if key not in ("environment", "profile")}
        if isinstance(out.get("launch"), dict):
            out["launch"] = {key: value for key, value in out["launch"].items() if key != "command"}
        if isinstance(out.get("metrics"), dict):
            out["metrics"] = {name: ({k: v for k, v in value.items() if k != "samples"} if isinstance(value, dict)
                                     else value) for name, value in out["metrics"].items()}
        for part in SHARED_PARTS:
            if part in out:
                out[part] = shared(out[part])
        return out

    return slim


def migrate(record: dict, path="", option: str = "--store") -> dict:
    version = record["schema_version"]
    while version < schema.SCHEMA_VERSION:
        step = MIGRATIONS.get(version)
        if step is None:
            raise UsageError(f"{option}: {path} holds records of schema version {version}, which this "
                             f"vnetbench (schema {schema.SCHEMA_VERSION}) cannot migrate")
        record = step(dict(record))
        version = record["schema_version"] = version + 1
    return record


def _refuse_newer(path: Path, bad: BadLine, option: str) -> None:
    version = bad.schema_version
    if isinstance(version, int) and not isinstance(version, bool) and version > schema.SCHEMA_VERSION:
        raise UsageError(f"{option}: {path} holds records of schema version {version} (line {bad.line}); "
                         f"this vnetbench reads versions up to {schema.SCHEMA_VERSION}: upgrade vnetbench "
                         "to read it")
