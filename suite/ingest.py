"""Records from elsewhere (direct ``--record`` launches, files fetched from hosts) into a store, each run once."""

import json

from .analysis.records import identity
from .errors import UsageError
from .records import check_record
from .store import Store


def load_records(paths: list[str]) -> list[dict]:
    """Every record in the files; UsageError naming the file and line of the first bad one."""
    records = []
    for path in paths:
        try:
            text = open(path, encoding="utf-8").read()
        except FileNotFoundError:
            raise UsageError(f"FILE: {path} does not exist") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"FILE: cannot read {path}: {exc}") from None
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                raise UsageError(f"{path}:{number}: not JSON; expected one vnetbench record per line") from None
            problems = check_record(record)
            if problems:
                raise UsageError(f"{path}:{number}: not a vnetbench record: {'; '.join(problems)}")
            records.append(record)
    return records


class Intake:
    """Appends records to ``store`` unless it holds their run and repetition already (``identity``)."""

    def __init__(self, store: Store):
        self.store = store
        store.check_writable()
        self.known = {identity(r) for r in store.scan()[0]} if store.path.exists() else set()

    def add(self, record: dict) -> bool:
        """Append ``record``; False (and nothing appended) when the store holds its run already."""
        key = identity(record)
        if key in self.known:
            return False
        self.store.append(record)
        self.known.add(key)
        return True


def ingest(paths: list[str], store: Store) -> tuple[int, list[dict]]:
    """Add the records of ``paths`` to ``store``: (how many were added, those it held already)."""
    records = load_records(paths)
    intake = Intake(store)
    skipped = [record for record in records if not intake.add(record)]
    return len(records) - len(skipped), skipped
