"""A batch job's own side: ``python -m vnetbench.engine.batchjob REQUEST.json`` runs the request through the engine.

A backend that submits runs as a scheduler's jobs (``Backend.batch``) is given ``engine.BATCH_COMMAND`` and
a request (``engine.request``, plus the job's own "store"); the job runs that command with the request's
path on its first node: the topology is loaded there (inside the allocation the backend uses its nodes), the
workload runs through the engine, and its records go to the job's store. Exit 0 exactly when every run
passed, so the scheduler's state says what the records say.
"""

import json
import sys
from pathlib import Path

# what a request holds (engine.request, and the job's "store" the backend adds)
FIELDS = ("workload", "ranks", "repeat", "timeout", "bind", "rank_options", "mpi", "topology", "store")


def read_request(path: str) -> dict:
    """The request in ``path``; UsageError when it is not one this vnetbench wrote."""
    from vnetbench.core.errors import UsageError

    try:
        request = json.loads(Path(path).read_text())
        return {key: request[key] for key in FIELDS}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path}: not a batch job's request ({exc!r})") from None


def main(argv: list[str]) -> int:
    from vnetbench import engine, topologies, workloads
    from vnetbench.core.errors import Interrupted, VnetbenchError, interrupt_on_signals

    # a scheduler ends a job (time limit, cancel, a failed node) with SIGTERM, SIGKILL following: unwind as the
    # CLI does, so that the ranks' job is ended and its directory removed
    interrupt_on_signals()
    if len(argv) != 1:
        print("usage: python -m vnetbench.engine.batchjob REQUEST.json", file=sys.stderr)
        return 2
    try:
        asked = read_request(argv[0])
        topology = topologies.load(asked["topology"])
        records = engine.run(workloads.from_request(asked["workload"]), asked["ranks"], topology=topology,
                             repeat=asked["repeat"], store=asked["store"], timeout=asked["timeout"],
                             bind=asked["bind"], rank_options=asked["rank_options"], mpi=asked["mpi"], submit=False)
    except Interrupted as exc:
        print(f"vnetbench: interrupted by signal {exc.signum}", file=sys.stderr)
        return 128 + exc.signum
    except VnetbenchError as exc:
        print(f"vnetbench: error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0 if all(record["status"] == "ok" for record in records) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
