"""Records from elsewhere (direct ``--record`` launches, files fetched from hosts) into a store, each run once."""

from vnetbench.analysis.records import identity
from vnetbench.core.errors import UsageError
from vnetbench.core.store import BadLine, Store


def load_records(paths: list[str]) -> list[dict]:
    """Every record in the files, each read with a bound (a regular file; lines up to MAX_LINE);
    UsageError naming the file and line of the first bad one."""
    records = []
    for path in paths:
        for entry in Store(path).entries("FILE"):
            if isinstance(entry, BadLine):
                raise UsageError(f"{path}:{entry.line}: {entry.reason}; expected one vnetbench record per line")
            records.append(entry[1])
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
