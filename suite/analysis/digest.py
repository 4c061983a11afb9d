"""A store read once, a record at a time, into what ``report`` shows: the study's tables, the
configurations that never passed, the breakdowns and the records whose metrics are not numbers.

No record is held: memory follows the configurations and their repetitions, not the store's bytes.
The exceptions, each bounded by what it shows: the passing runs of kernels that declare a breakdown
(stream, md: their per-rank numbers), and the records a caller asks to keep: the passing runs, trimmed,
when plots are drawn; one run's records for its per-size table; every record for ``report --runs``.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import metrics
from .breakdown import Breakdowns
from .records import Loaded, for_tables, stream
from .tables import StudyTables


@dataclass
class Digest:
    loaded: Loaded  # the counts: records, not ok, skipped lines, migrated, duplicates
    study: StudyTables
    breakdowns: Breakdowns
    predictions: object = None  # vnetbench.analysis.predictions.Predictions: predictions beside the runs they predict
    not_numbers: list[str] = field(default_factory=list)  # "store:line: kernel run R repetition N: name=value"
    profiles: object = None  # profile.view.Profiles: the last profiled records' short rows
    kept: list[dict] = field(default_factory=list)  # the records asked for, in store order


def digest(path, option: str = "--store", keep: Callable[[dict], bool] | None = None, whole: bool = False) -> Digest:
    """The store at ``path`` read once. Records for which ``keep`` is true are kept too (trimmed to what
    tables and plots read, or ``whole``): memory then grows with them, so ask only for what is shown."""
    from .predictions import Predictions, skipped
    from vnetbench.profile.view import Profiles

    slim = for_tables()
    result = Digest(Loaded(Path(path), []), StudyTables(), Breakdowns(keep=slim), profiles=Profiles(),
                    predictions=Predictions())
    for line, record in stream(path, option, result.loaded):
        result.predictions.add(record)
        if skipped(record):  # calibrations and predictions: no workload's runs
            continue
        result.study.add(record)
        result.profiles.add(record)
        if keep is not None and keep(record):
            result.kept.append(record if whole else slim(record))
        if record["status"] != "ok":
            continue
        bad = metrics.not_numbers(record)
        if bad:
            result.not_numbers.append(f"{result.loaded.path}:{line}: {record['kernel']} run {record['run_id']} "
                                      f"repetition {record['repetition'] + 1}: {', '.join(bad)}")
        result.breakdowns.add(record)
    return result


def passing(record: dict) -> bool:
    return record["status"] == "ok"
