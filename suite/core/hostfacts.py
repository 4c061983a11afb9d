"""The store's environment record: the facts ``hosts facts`` gathered of each host, in a file beside the store
(results.jsonl -> results.environment.json), merged host by host as they are gathered again."""

import json
from pathlib import Path

from vnetbench.core.errors import SpecError, UsageError


def environment_path(store: str | Path) -> Path:
    """The store's environment record: the hosts' facts, beside the store (results.jsonl -> results.environment.json)."""
    store = Path(store)
    return store.with_name(f"{store.stem}.environment.json")


def save_facts(store: str | Path, found: dict[str, dict], source: str) -> Path:
    """Merge ``found`` (host name -> facts, or {"error": why}) into the store's environment record (written whole,
    then renamed into place)."""
    from vnetbench.core.records import now

    path = environment_path(store)
    record = {"schema_version": 1, "kind": "environment", "hosts": {}}
    if path.exists():
        from vnetbench.core.files import read_text

        try:  # a few KiB a host: bounded, and a device or FIFO put in its place is refused, not read
            record = json.loads(read_text(path, str(path), "an environment record", limit=64 << 20))
        except (SpecError, json.JSONDecodeError) as exc:
            raise UsageError(f"{path}: not an environment record ({exc}); move it away") from None
    stamp = now()
    for name, host_facts in found.items():
        if "error" not in host_facts:
            record["hosts"][name] = {**host_facts, "gathered_at": stamp, "source": source}
    record["updated_at"] = stamp
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)
    return path
