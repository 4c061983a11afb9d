"""The output formats' registry (analysis/formats/): each module says what it applies to, commands take their
--format choices and written-file options from it, and none of it costs start-up time it does not use."""

import argparse
import json
import subprocess
import sys

import pytest

from vnetbench.analysis import formats, report, tables
from vnetbench.analysis.render import Document, Grid

PRINTED = {"run": ["table", "osu"], "report": ["table", "markdown", "csv", "json"],
           "compare": ["table", "markdown", "csv", "json"]}
WRITTEN = {"run": [], "report": ["--plot", "--html"], "compare": ["--junit"]}


@pytest.mark.parametrize("name", list(formats.FORMATS))
def test_every_format_module_says_what_it_applies_to_and_renders_it(name):
    module = formats.FORMATS.load(name)
    assert module.__doc__ and set(module.APPLIES) <= set(formats.KINDS) and module.APPLIES
    if hasattr(module, "OPTION"):
        assert module.OPTION == f"--{name}" and module.METAVAR and module.HELP
        for kind in module.APPLIES:
            assert callable(getattr(module, f"write_{kind}"))
    else:
        if "run" in module.APPLIES:
            assert callable(module.records)
        if {"report", "compare"} & set(module.APPLIES):
            assert callable(module.document)


@pytest.mark.parametrize("kind", formats.KINDS)
def test_commands_take_their_choices_and_written_options_from_the_registry(kind):
    assert list(formats.choices(kind)) == PRINTED[kind]
    assert [module.OPTION for module in formats.written(kind)] == WRITTEN[kind]


def test_report_and_compare_offer_what_the_registry_lists():
    from vnetbench.cli import build_parser

    for command in ("report", "compare"):
        sub = build_parser(command)._subparsers._group_actions[0].choices[command]
        options = {action.option_strings[0]: action for action in sub._actions if action.option_strings}
        assert list(options["--format"].choices) == PRINTED[command]
        assert all(option in options for option in WRITTEN[command])


def test_an_unknown_format_is_bad_input():
    from vnetbench.core.errors import UsageError

    with pytest.raises(UsageError, match="--format: unknown format 'yaml'; choose from table, markdown"):
        formats.FORMATS.load("yaml")


def test_every_printed_format_renders_a_document():
    doc = Document([Grid(["a", "b|c"], [["1", "2"]], "title", ["a note"])], before=["before"], legend={"k": "v"})
    assert "title" in formats.render("table", doc) and "note: a note" in formats.render("table", doc)
    assert "| a | b\\|c |" in formats.render("markdown", doc)
    assert formats.render("csv", doc) == "a,b|c\n1,2"
    assert json.loads(formats.render("json", doc))[0]["rows"] == [["1", "2"]]


def test_choosing_run_formats_imports_no_format_module_rich_or_matplotlib():
    """``run``'s parser gets its --format choices without importing a format (argparse reads them when
    --format is given or help printed, and a metavar keeps it from reading them when the option is added)."""
    code = ("import argparse, sys\n"
            "from vnetbench.analysis import formats\n"
            "parser = argparse.ArgumentParser()\n"
            "parser.add_argument('--format', choices=formats.choices('run'), default='table', metavar='FORMAT',\n"
            "                    help='%(choices)s')\n"
            "parser.parse_args([])\n"
            "print(sorted(m for m in sys.modules if m.startswith(('vnetbench.analysis.', 'rich', 'matplotlib'))))\n"
            "parser.parse_args(['--format', 'osu'])\n"
            "print('osu' in parser.format_help())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "['vnetbench.analysis.formats']" and out[1] == "True"


def test_the_study_report_names_a_kernels_breakdown_once():
    """md's breakdown read "md: md: time per phase"."""
    from vnetbench.analysis.breakdown import breakdowns

    phases = {"force_s": 1.0, "neighbour_s": 0.2, "comm_s": 0.3, "migrate_s": 0.1, "reduce_s": 0.05}
    record = {"kernel": "md", "status": "ok", "ranks": 2, "topology": {"name": "native"}, "params": {},
              "metrics": {"elapsed_s": 2.0, **phases}, "launch": {"notes": {}}}
    (row,) = breakdowns([record])
    assert row["title"] == "md: time per phase"
    text = report.render_study(tables.build([]), "table", breakdowns=[row])
    assert "md: time per phase" in text and "md: md:" not in text


def test_run_formats_live_in_the_registry_only():
    assert not hasattr(report, "RUN_FORMATS")
