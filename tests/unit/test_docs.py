"""The docs cannot rot: MkDocs builds them with every link and anchor checked, the README's links resolve, every
shell example carries a mark docs/tests.md explains, and every ``vnetbench`` line of them parses as the CLI would
parse it. (The examples marked to run are run by tests/mpi and tests/emulation's test_doc_examples.py.)"""

import contextlib
import io
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import doc_examples
from harness.doc_examples import ROOT

LINK = re.compile(r"\[[^\]\n]+\]\(([^)\s]+)\)")
mkdocs_missing = pytest.mark.skipif(shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None,
                                    reason="no mkdocs in this venv (the test extra installs it)")


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(config), "--site-dir", str(site)], capture_output=True, text=True, timeout=120)


@mkdocs_missing
def test_the_docs_build_strict_without_a_warning(tmp_path):
    done = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0 and "WARNING" not in done.stderr, done.stderr
    assert (tmp_path / "site" / "tests" / "index.html").exists()


@mkdocs_missing
def test_a_broken_link_anchor_or_repository_link_fails_the_build(tmp_path):
    # the same build on a copy of the docs with one of each mistake: the check above is worth something
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy)
    shutil.copytree(ROOT / "scripts", copy / "scripts")
    (copy / "examples").mkdir()
    (copy / "examples" / "README.md").write_text("# examples\n")
    page = copy / "docs" / "apps.md"
    page.write_text(page.read_text() + "\n[a](nowhere.md) [b](tests.md#no-such-heading) [c](../no/such/file.md)\n")
    done = build(copy / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    for target in ("nowhere.md", "no-such-heading", "../no/such/file.md"):
        assert target in done.stderr, done.stderr
    assert "examples/README.md" not in done.stderr  # a repository file that is there passes


def test_every_relative_link_of_the_readme_and_contributing_resolves():
    # both live outside docs_dir, where MkDocs does not look
    broken = []
    for page in (ROOT / "README.md", ROOT / "CONTRIBUTING.md"):
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path) if path else page
            if not resolved.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and anchor not in {slug(h) for h in headings(resolved)}:
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken


def test_the_readme_links_every_page_of_the_docs():
    linked = {Path(t.partition("#")[0]).name for t in LINK.findall((ROOT / "README.md").read_text())
              if t.startswith("docs/")}
    assert {path.name for path in (ROOT / "docs").glob("*.md")} - {"index.md"} <= linked


def test_every_shell_example_has_a_mark_docs_tests_md_explains():
    unmarked = [f"{b.where} ({b.mark or 'no mark'})" for b in doc_examples.blocks()
                if b.mark not in doc_examples.MARKS]
    assert not unmarked, f"put <!-- example: MARK --> before each, MARK one of {list(doc_examples.MARKS)}"
    explained = (ROOT / "docs" / "tests.md").read_text()
    assert not [mark for mark in doc_examples.MARKS if f"| `{mark}` |" not in explained]


def test_the_mark_check_sees_a_block_without_a_mark(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n```console\nvnetbench report\n```\n\n<!-- example: runs -->\n```sh\nls\n```\n")
    assert [(b.line, b.mark) for b in doc_examples.blocks([page])] == [(3, None), (8, "runs")]


def test_every_vnetbench_line_of_every_example_parses():
    # what the CLI checks before it starts anything (options, kernel, kernel options, study, application file),
    # for the lines no test runs too: a renamed option fails here
    failed, parsed = [], 0
    for block in doc_examples.blocks():
        for argv in doc_examples.vnetbench_argvs(block):
            try:
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    doc_examples.parse(argv)
                parsed += 1
            except (Exception, SystemExit) as exc:
                failed.append(f"{block.where}: vnetbench {' '.join(argv)}: {type(exc).__name__} {exc}")
    assert not failed
    assert parsed > 50


@pytest.mark.parametrize("argv", [["run", "halo", "--stepz", "1"], ["sweep", "--topolgies", "native"],
                                  ["topology", "shw"], ["run", "--app", "examples/nope.yaml"]])
def test_the_parse_check_refuses_what_the_cli_refuses(argv):
    with pytest.raises((Exception, SystemExit)), contextlib.redirect_stderr(io.StringIO()):
        doc_examples.parse(argv)


def headings(path: Path) -> list[str]:
    return [line.lstrip("#").strip() for line in path.read_text().splitlines() if line.startswith("#")]


def slug(heading: str) -> str:
    # as MkDocs's toc extension (and GitHub, for these headings) makes anchors
    text = re.sub(r"[^\w\s-]", "", heading.lower()).strip()
    return re.sub(r"[-\s]+", "-", text)


@pytest.mark.parametrize("text, ok", [("sh -c 'exit 2'   # refused (exit 2)\ntrue", True),
                                      ("sh -c 'exit 2'\n# vnetbench: error: ...   (exit 2)\ntrue", True),
                                      ("true   # (exit 2)", False), ("sh -c 'exit 1'   # (exit 2)", False),
                                      ("false   # exit 1 on a regression\ntrue", False)])
def test_a_runnable_example_exits_as_its_comment_says(tmp_path, text, ok):
    block = doc_examples.Block(ROOT / "README.md", 1, "sh", "runs", text)
    assert (doc_examples.run(block, tmp_path, timeout=30).returncode == 0) == ok
