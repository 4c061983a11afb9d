"""The layers, as test_tiers.py keeps the tiers: the core (suite/core/, ``vnetbench.core``) imports only itself;
kernels/ and topologies/ import nothing of suite/ but the core. Read from the sources (ast), imports at any depth,
relative ones resolved; a function a module names in ``SHIPPED`` is skipped: its source runs on another host, in
that host's Python, importing that host's vnetbench (topologies/launch/hostcheck.py's ``probe``)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"suite": "vnetbench", "kernels": "vnetbench.kernels", "topologies": "vnetbench.topologies"}


def module_name(path: Path) -> tuple[str, bool]:
    """(dotted name, is a package) of a source file."""
    folder = path.relative_to(ROOT).parts[0]
    rel = path.relative_to(ROOT / folder).with_suffix("").parts
    parts = [p for p in rel if p != "__init__"]
    return ".".join([FOLDERS[folder], *parts]), path.name == "__init__.py"


def vnetbench_imports(path: Path) -> set[str]:
    """Every vnetbench module or name ``path`` imports, as absolute dotted names, but in ``SHIPPED`` functions."""
    tree = ast.parse(path.read_text())
    shipped = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "SHIPPED" for t in node.targets):
            shipped = set(ast.literal_eval(node.value))
    skipped = {id(inner) for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in shipped
               for inner in ast.walk(node)}
    name, package = module_name(path)
    anchor = name.split(".") if package else name.split(".")[:-1]
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            # ``import vnetbench`` alone is the namespace's root, read for its __version__: it imports nothing
            found.update(a.name for a in node.names if a.name.startswith("vnetbench."))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(anchor[:len(anchor) - (node.level - 1)] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base.split(".")[0] == "vnetbench":
                found.update(f"{base}.{a.name}" for a in node.names)
    return found


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def sources(*folders) -> list[Path]:
    return sorted(path for folder in folders for path in (ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("path", sources("kernels", "topologies"), ids=lambda p: str(p.relative_to(ROOT)))
def test_kernels_and_topologies_import_nothing_of_suite_but_the_core(path):
    upward = {name for name in vnetbench_imports(path) if not any(
        within(name, package) for package in ("vnetbench.core", "vnetbench.kernels", "vnetbench.topologies"))}
    assert not upward, f"{path.relative_to(ROOT)} imports {', '.join(sorted(upward))}"


@pytest.mark.parametrize("path", sources("suite/core"), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_core_imports_only_itself(path):
    outside = {name for name in vnetbench_imports(path) if not within(name, "vnetbench.core")}
    assert not outside, f"{path.relative_to(ROOT)} imports {', '.join(sorted(outside))}"


def test_the_rule_sees_an_upward_import(tmp_path, monkeypatch):
    # the check itself: a topology module importing the runtime, absolutely, relatively or in a function, is seen
    probe = ROOT / "topologies" / "base.py"
    source = "from .. import engine\nfrom vnetbench.engine.launch import plan\ndef f():\n    import vnetbench.engine.sweep\n" \
             "import vnetbench\n"
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: source if self == probe else "")
    assert vnetbench_imports(probe) == {"vnetbench.engine", "vnetbench.engine.launch.plan", "vnetbench.engine.sweep"}
