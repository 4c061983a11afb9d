"""The test tiers: a folder of tests/ each, a pytest marker each (declared in setup.cfg, put on every test by
tests/conftest.py from its folder), so that ``pytest -m TIER`` runs that folder and nothing else."""

import configparser
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


def declared() -> dict[str, str]:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    lines = [line.strip() for line in config["tool:pytest"]["markers"].splitlines() if line.strip()]
    return dict(line.split(":", 1) for line in lines)


def tier_folders() -> set[str]:
    """The folders of tests/ that hold tests (harness/ and data/ hold none: they are no tier)."""
    return {path.name for path in TESTS.iterdir() if path.is_dir() and any(path.glob("test_*.py"))}


def test_every_tier_folder_is_a_declared_marker_and_every_marker_a_folder():
    assert set(declared()) == tier_folders()
    for name, description in declared().items():
        assert len(description.strip()) > 20, f"{name}: say which real component the tier starts"


def test_the_two_lanes_run_every_tier_once():
    # the README's test command runs the suite in two lanes (tests/harness/lanes.py): the sandbox's tiers named,
    # the first lane's found, so that a tier added later is in one of them and in neither twice
    from tests.harness import lanes

    here, away = lanes.here_tiers(), list(lanes.AWAY)
    assert sorted(here + away) == sorted(f"tests/{name}" for name in tier_folders())
    assert here[:len(lanes.FIRST)] == list(lanes.FIRST)
    # but for some of the unit tier's files, which end the second lane (its balance): each run there and left out
    # here, none missing (a renamed one would silently go back to the first lane)
    shared = lanes.away_unit()
    assert shared == list(lanes.UNIT_AWAY) and "tests/unit" in here
    assert all(path.startswith("tests/unit/test_") for path in shared)
    assert lanes.away_args() == away + shared
    assert lanes.here_args() == here + [f"--ignore={path}" for path in shared]


def test_no_test_names_a_tier_by_hand():
    # the folder is the tier: a decorator would put a test in a second tier, and -m would no longer be a folder
    mark = re.compile(rf"pytest\.mark\.({'|'.join(sorted(declared(), key=len, reverse=True))})\b")
    found = [f"{path.relative_to(TESTS)}:{n}" for path in sorted(TESTS.rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if mark.search(line)]
    assert not found


def test_the_unit_tier_starts_no_mpi():
    helpers = re.compile(r"\b(requires_mpi|mpirun_path|direct_launch|mpi_env)\b")
    found = [path.name for path in sorted((TESTS / "unit").glob("test_*.py"))
             if path != Path(__file__).resolve() and helpers.search(path.read_text())]
    assert not found, "these start MPI: they belong in tests/mpi"


def test_a_marker_selects_its_folder_alone():
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-m", "slurm", "tests/slurm", "tests/mpi"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    selected = [line for line in proc.stdout.splitlines() if "::" in line]
    assert selected and all(line.startswith("tests/slurm/") for line in selected), selected
    assert re.search(rf"{len(selected)}/\d+ tests collected \(\d+ deselected\)", proc.stdout), proc.stdout[-500:]
