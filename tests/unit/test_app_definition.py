"""The application definition: validation with file:line:field errors, and reading a run's output."""

import os
import socket
import textwrap
from pathlib import Path

import pytest

from vnetbench import apps
from vnetbench.workloads.app import read_output
from vnetbench.apps.workload import AppContract
from vnetbench.core.errors import SpecError, UsageError

GOOD = """\
name: lammps-lj
command: [lmp, -in, in.lj, -var, c, "40"]
env: {OMP_NUM_THREADS: "1"}
timeout: 600
parser: lammps
success: 'Total wall time'
metrics:
  - {name: loop_time, regex: 'Loop time of ([0-9.eE+-]+)', unit: s, better: lower}
"""


def write(tmp_path, text, name="app.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_the_issues_example_loads_and_resolves_paths_beside_it(tmp_path):
    (tmp_path / "in.lj").write_text("run 1\n")
    app = apps.load_app(write(tmp_path, GOOD))
    assert app.name == "lammps-lj" and app.spec.timeout == 600 and app.spec.env == {"OMP_NUM_THREADS": "1"}
    assert app.argv()[1:] == ["-in", str(tmp_path / "in.lj"), "-var", "c", "40"]
    assert app.declaration()["parser"] == "lammps"
    assert app.declaration()["metrics"][0]["match"] == "last"


@pytest.mark.parametrize("text, message", [
    (GOOD.replace("parser:", "parsre:"), "app.yaml:5: parsre: unknown field (did you mean 'parser'?)"),
    (GOOD.replace("command: [lmp, -in, in.lj, -var, c, \"40\"]\n", ""), "app.yaml:1: command: required, but missing"),
    (GOOD.replace("parser: lammps", "parser: gromacs"), "app.yaml:5: parser: unknown parser 'gromacs'; allowed: osu, imb"),
    (GOOD.replace("'Loop time of ([0-9.eE+-]+)'", "'Loop time of'"), "app.yaml:8: metrics[0].regex: needs a group"),
    (GOOD.replace("'Total wall time'", "'Total ((wall'"), "app.yaml:6: success: not a valid regular expression"),
    (GOOD.replace('"1"}', "1}"), "app.yaml:3: env.OMP_NUM_THREADS: Input should be a valid string"),
    (GOOD.replace("timeout: 600", "timeout: -1"), "app.yaml:4: timeout: Input should be greater than 0"),
    (GOOD.replace("better: lower", "better: faster"), "app.yaml:8: metrics[0].better"),
    (GOOD.replace("unit: s,", "unit: s, unti: s,"), "app.yaml:8: metrics[0].unti: unknown field (did you mean 'unit'?)"),
    (GOOD.replace("name: loop_time", "name: elapsed_s"), "metrics: metric 'elapsed_s' is declared twice"),
    (GOOD.replace("name: lammps-lj", "name: halo"), "app.yaml:1: name: 'halo' is a kernel's name"),
    (GOOD.replace("name: lammps-lj", "name: 'lammps lj'"), "app.yaml:1: name: expected a name"),
    (GOOD + "timeout: 5\n", "app.yaml:9: timeout: given twice"),
    ("- just a list\n", "app.yaml:1: expected a mapping of fields"),
    ("name: [unclosed\n", "app.yaml:2: not valid YAML"),
])
def test_bad_definitions_name_file_line_and_field(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as caught:
        apps.load_app(path)
    assert message in str(caught.value).replace(str(path), "app.yaml")
    assert caught.value.exit_code == 2


def test_missing_file_is_bad_input(tmp_path):
    with pytest.raises(UsageError, match="--app .*nothing.yaml: it does not exist"):
        apps.load_app(tmp_path / "nothing.yaml")


def test_missing_program_and_unreadable_input_are_bad_input(tmp_path):
    app = apps.load_app(write(tmp_path, GOOD.replace("[lmp,", "[no-such-program-vnb,")))
    with pytest.raises(UsageError, match="command\\[0\\]: program 'no-such-program-vnb' not found on PATH"):
        app.check_startable()
    app = apps.load_app(write(tmp_path, "name: script\ncommand: [./missing-input.sh]\n"))
    with pytest.raises(UsageError, match="command\\[0\\]: program './missing-input.sh' not found"):
        app.check_startable()
    # an input beside the YAML that exists but cannot be opened (a socket: ENXIO, even for root)
    (tmp_path / "inputs").mkdir()
    with socket.socket(socket.AF_UNIX) as listening:
        cwd = os.getcwd()
        os.chdir(tmp_path / "inputs")  # a relative bind: tmp_path may be longer than a socket address
        try:
            listening.bind("in.lj")
        finally:
            os.chdir(cwd)
        app = apps.load_app(write(tmp_path, GOOD.replace("in.lj", "inputs/in.lj")))
        with pytest.raises(UsageError, match="command\\[2\\]: 'inputs/in.lj': cannot read: No such device"):
            app.check_startable()


def test_only_arguments_naming_something_beside_the_yaml_are_resolved_and_checked(tmp_path):
    """Outputs, options and shell command lines reach the program as written, as plain exec passes them;
    before, any argument with a '/' was taken for an input beside the YAML and refused when missing."""
    (tmp_path / "inputs").mkdir()
    (tmp_path / "inputs" / "data.lj").write_text("run 1\n")
    (tmp_path / "script.sh").write_text("#!/bin/sh\n")
    (tmp_path / "script.sh").chmod(0o755)
    app = apps.load_app(write(tmp_path, """\
        name: outputs
        command: [./script.sh, -log, logs/run.log, -in, inputs/data.lj, /nonexistent-vnb/out.txt, out/,
                  "echo 1 > /tmp/x/out.txt", inputs]
        """))
    app.check_startable()
    assert app.argv() == [str(tmp_path / "script.sh"), "-log", "logs/run.log", "-in", str(tmp_path / "inputs/data.lj"),
                          "/nonexistent-vnb/out.txt", "out/", "echo 1 > /tmp/x/out.txt", str(tmp_path / "inputs")]
    # a program given by a path that is a symlink (a venv's bin/python) keeps that path
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(tmp_path / "script.sh")
    assert apps.adhoc([str(tmp_path / "bin" / "python")]).program() == str(tmp_path / "bin" / "python")
    assert apps.load_app(write(tmp_path, "name: py\ncommand: [bin/../bin/python]\n")).program() == \
        str(tmp_path / "bin" / "python")
    # exec --record's definition: the shell line that plain exec runs is not refused
    shell = apps.adhoc(["sh", "-c", "echo 1 > /tmp/x/out.txt"])
    shell.check_startable()
    assert shell.argv()[1:] == ["-c", "echo 1 > /tmp/x/out.txt"]


def test_adhoc_definition_for_exec_record():
    app = apps.adhoc(["/usr/bin/lmp", "-in", "x"], "lammps")
    assert app.name == "lmp" and app.spec.parser == "lammps"
    with pytest.raises(UsageError, match="--parser: unknown parser 'nope'"):
        apps.adhoc(["lmp"], "nope")


OUTPUT = "step 1\nLoop time of 2.5 on 2 procs\nLoop time of 3.5 on 2 procs\nTotal wall time: 0:00:03\n"


def test_regex_metrics_take_the_last_match_by_default_or_the_first(tmp_path):
    app = apps.load_app(write(tmp_path, GOOD.replace("parser: lammps\n", "").replace(
        "better: lower}", "better: lower}\n  - {name: first_loop, regex: 'Loop time of (\\S+)', match: first}")))
    assert read_output(app, OUTPUT) == ({"loop_time": 3.5, "first_loop": 2.5}, [])


def test_missing_success_pattern_declared_metric_and_parsed_table_are_problems(tmp_path):
    app = apps.load_app(write(tmp_path, GOOD))
    metrics, problems = read_output(app, "nothing useful\n")
    assert metrics == {}
    assert problems == ["success pattern 'Total wall time' not found in the output",
                        "parser lammps: no 'Loop time of ... on N procs for N steps with N atoms' line: the run did "
                        "not finish a loop",
                        "metric loop_time: regex 'Loop time of ([0-9.eE+-]+)' matched nothing in the output"]


def test_an_apps_workload_fills_the_kernel_contract_from_its_declaration(tmp_path):
    app = apps.load_app(write(tmp_path, GOOD))
    workload = AppContract(app.name, app.declaration())
    m = {"elapsed_s": 1.5, "loop_time": 1.2, "loop_time_s": 1.2, "atoms": 32000}
    declared = {metric.name: (metric.unit, metric.better, value) for metric, value in workload.metrics(m)}
    assert declared["elapsed_s"] == ("s", "lower", 1.5) and declared["loop_time"] == ("s", "lower", 1.2)
    assert workload.table(list(declared)) == ["elapsed_s", "loop_time_s", "loop_time"]
    assert workload.headline(m)[0] == ("elapsed (s)", 1.5)


HOSTILE = sorted(p for p in (Path(__file__).parent.parent / "data" / "hostile").iterdir()
                 if p.suffix in (".yaml", ".yml") and p.name != "cases.yaml")


@pytest.mark.parametrize("path", HOSTILE, ids=[p.name for p in HOSTILE])
def test_the_hostile_corpus_is_refused_as_a_definition_in_one_printable_line(path):
    with pytest.raises(UsageError) as caught:
        apps.load_app(path)
    message = str(caught.value)
    assert "\n" not in message and message.isprintable() and str(path) in message


def test_a_misspelt_required_field_is_one_problem_not_two(tmp_path):
    path = write(tmp_path, GOOD.replace("command:", "comand:"))
    with pytest.raises(SpecError, match=r"app.yaml:2: comand: unknown field \(did you mean 'command'\?\); "
                                        r"allowed: [a-z, ]+$"):
        apps.load_app(path)
