"""The table format draws plain documents itself, as rich would (rich's import and first table cost every
``vnetbench run`` a tenth of a second): here its drawing is held against rich's own, character for character,
on real documents of run, report and compare, and anything rich might lay out otherwise goes to rich."""

import json
from pathlib import Path

import pytest

from vnetbench.analysis import compare, digest, report
from vnetbench.analysis.formats import table
from vnetbench.analysis.render import Document, Grid

STUDY = Path(__file__).resolve().parent.parent / "data" / "stores" / "study.jsonl"


def _records():
    return [json.loads(line) for line in STUDY.read_text().splitlines()]


def _run_document(records):
    doc = report.records_document(records)
    doc.grids += report.sizes_document(records).grids
    return doc


def _study_document():
    read = digest.digest(str(STUDY))
    context = {"store": str(STUDY), "baseline": "native", "records": read.loaded.count, "not_ok": 0,
               "skipped_lines": [], "unmeasured": read.study.unmeasured(), "unconfined": read.study.unconfined(),
               "not_numbers": [], "breakdowns": read.breakdowns.rows()}
    return report.study_document(read.study.build("native"), context)


def _compare_document():
    records = _records()
    slower = [{**r, "metrics": {k: v * 1.5 if isinstance(v, float) else v for k, v in r["metrics"].items()}}
              for r in records]
    result = compare.compare(records, slower)
    headers, body = compare.rows(result, show_all=True)
    return Document([Grid(headers, body)], before=compare.summary_lines(result))


DOCUMENTS = {
    "run, one record": lambda: _run_document(_records()[:1]),
    "run, per-size tables": lambda: _run_document([r for r in _records() if r["kernel"] == "pingpong"]),
    "report": _study_document,
    "compare": _compare_document,
}


@pytest.mark.parametrize("name", DOCUMENTS)
def test_plain_documents_are_drawn_as_rich_draws_them(name):
    doc = DOCUMENTS[name]()
    drawn = table._drawn(doc)
    assert drawn is not None, "a plain document went to rich: the drawing was not checked"
    assert drawn == table._rich(doc)


@pytest.mark.parametrize("doc", [
    Document([Grid(["wide", "x"], [["\u4e2d\u6587", "1"]])]),          # double-width characters
    Document([Grid(["a"], [["x" * 250]])]),                            # wider than the console: rich wraps
    Document([Grid(["[bold]a[/bold]"], [["1"]])]),                    # markup in a header
    Document([Grid(["a"], [["1"]])], before=["note :smile: here"]),  # an emoji code in a line
    Document([Grid(["a"], [])]),                                       # no rows
    Document([Grid(["a"], [["tab\there"]])]),                          # a control character
], ids=["wide", "too wide", "markup", "emoji", "empty", "tab"])
def test_what_rich_might_lay_out_otherwise_goes_to_rich(doc):
    assert table._drawn(doc) is None
    assert table.document(doc) == table._rich(doc)
