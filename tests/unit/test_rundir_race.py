"""Two vnetbench processes make and remove their run folders in one state root at once: one removes the empty
parent (``rundir.remove_dir``, as ``jobs.end`` does) while the other is making its folder in it."""

import multiprocessing
import tempfile
from pathlib import Path

from vnetbench.core import rundir

ROUNDS = 1500


def _churn(root: str, failures) -> None:
    jobs = Path(root) / "jobs"
    try:
        for _ in range(ROUNDS):
            rundir.remove_dir(rundir.made_in((Path(root), jobs), lambda: Path(tempfile.mkdtemp(dir=jobs))))
    except Exception as exc:  # noqa: BLE001 - the failure is what the test reports
        failures.put(f"{type(exc).__name__}: {exc}")


def test_a_folder_made_while_another_process_removes_the_empty_parents_is_made_again(tmp_path):
    root = tmp_path / "state"
    context = multiprocessing.get_context("fork")
    failures = context.Queue()
    workers = [context.Process(target=_churn, args=(str(root), failures)) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [worker.exitcode for worker in workers] == [0, 0]
    assert failures.empty(), failures.get()
    assert list(root.iterdir()) == []  # every folder the two made was removed again
