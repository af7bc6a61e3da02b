"""The one-way pipeline of STYLE.md, enforced by parsing imports."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "memsim"
SHARED = {"units", "errors", "atomic", "presets", "dtypes", "files", "limits", "registry"}  # leaf modules any layer may use
ALLOWED = {
    "hardware": {"hardware"},
    "workload": {"workload"},
    "mapping": {"mapping", "hardware", "workload"},
    "engine": {"engine", "mapping", "hardware"},
    "report": {"report", "engine", "mapping", "hardware", "workload"},
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "memsim":
            found.update(f"memsim.{a.name}" for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("memsim"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("memsim"))
    return found


def test_layers_import_only_what_the_pipeline_allows():
    for package, allowed in ALLOWED.items():
        for path in (ROOT / package).rglob("*.py"):
            for mod in _imports(path):
                parts = mod.split(".")
                target = parts[1] if len(parts) > 1 else "memsim"
                assert target in allowed | SHARED, f"{path.relative_to(ROOT)} imports {mod}"


def test_simpy_only_in_the_engine():
    for path in ROOT.rglob("*.py"):
        text = path.read_text()
        if "import simpy" in text or "from simpy" in text:
            assert path.parent.name == "engine", path


def test_modules_stay_small():
    for path in ROOT.rglob("*.py"):
        assert len(path.read_text().splitlines()) <= 400, path
