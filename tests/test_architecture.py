"""The one-way pipeline of STYLE.md and the top floor's order, enforced by parsing imports."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "memsim"
PIPELINE = {
    "hardware": {"hardware"},
    "workload": {"workload"},
    "stack": {"stack", "hardware", "workload"},
    "mapping": {"mapping", "hardware", "workload", "stack"},
    "engine": {"engine", "mapping", "hardware", "stack"},
    "report": {"report", "engine", "mapping", "hardware", "workload", "stack"},
}
# The top floor, in its order: each package may import the pipeline and the packages before it.
# ``core`` comes first and is what every layer may use; it imports nothing else of memsim.
TOP_FLOOR = ("core", "run", "serving", "validation", "sweep", "cli")
ALLOWED = {"core": {"core"}, **{package: allowed | {"core"} for package, allowed in PIPELINE.items()},
           **{package: {*PIPELINE, *TOP_FLOOR[:i + 1]} for i, package in enumerate(TOP_FLOOR) if i}}


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
                assert target in allowed or mod == "memsim.__version__", f"{path.relative_to(ROOT)} imports {mod}"


def test_the_top_floor_is_packages():
    """Nothing lies loose beside the packages but ``__init__.py``, the lazy public names."""
    loose = {p.name for p in ROOT.glob("*.py")} - {"__init__.py"}
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    assert not loose, loose
    assert packages == set(ALLOWED), packages ^ set(ALLOWED)


def test_the_order_check_refuses_an_import_up_the_floor():
    """``run`` importing ``sweep`` (the circle ``api`` -> ``sweep`` -> ``whatif`` once was) is refused."""
    assert "sweep" not in ALLOWED["run"] and "cli" not in ALLOWED["sweep"] and ALLOWED["core"] == {"core"}


def test_simpy_only_in_the_engine():
    for path in ROOT.rglob("*.py"):
        text = path.read_text()
        if "import simpy" in text or "from simpy" in text:
            assert path.parent.name == "engine", path


def test_modules_stay_small():
    for path in ROOT.rglob("*.py"):
        assert len(path.read_text().splitlines()) <= 400, path


DOC = ROOT.parent / "docs" / "architecture.md"


def _module_table() -> dict[str, str]:
    """docs/architecture.md's module table: first cell (the modules it names) -> may import."""
    table = DOC.read_text().split("## Modules")[1].split("\n## ")[0]
    rows = {}
    for line in table.splitlines():
        if line.startswith("| `memsim/"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0]] = cells[-1]
    return rows


def test_the_architecture_page_names_every_package_and_module():
    rows = _module_table()
    for path in sorted(ROOT.iterdir()):
        if path.is_dir() and (path / "__init__.py").exists():
            assert f"`memsim/{path.name}/`" in rows, f"docs/architecture.md has no row for memsim/{path.name}/"
    for package in TOP_FLOOR[:3] + TOP_FLOOR[4:]:
        line = next(line for line in DOC.read_text().splitlines() if line.startswith(f"| `memsim/{package}/` |"))
        for path in sorted((ROOT / package).glob("*.py")):
            if path.stem != "__init__":
                assert f"`{path.name}`" in line, f"docs/architecture.md's {package} row does not name {path.name}"


def test_the_architecture_page_states_the_imports_this_test_enforces():
    rows = _module_table()
    for package, allowed in ALLOWED.items():
        stated = rows[f"`memsim/{package}/`"]
        assert set(stated.replace(" ", "").split(",")) == allowed, package


# Reading a resource's identity back out of its written name: ``link:nvlink[0>sw]``, ``level:x``.
NAME_PARSING = re.compile(r'startswith\("(link|level):|removeprefix\("(link|level):|\.r?split\("[\[>]"|'
                          r'\.r?partition\("[\[>]"\)|"(link|level):" in ')


def test_no_module_parses_a_resource_name_back():
    """Identities travel typed (``memsim.hardware.resource``); only ``written_name`` makes text of
    them, for the writers, and nothing reads that text back."""
    for path in ROOT.rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            assert not NAME_PARSING.search(line), f"{path.relative_to(ROOT.parent)}:{number}: {line.strip()}"


def test_the_name_parsing_pattern_finds_what_it_is_for():
    for line in ('key.split("[")[0] == name', 'if name.startswith("link:"):', 'kind, _, n = s.partition("[")',
                 'a, b = label.split(">")', 'if "link:" in key'):
        assert NAME_PARSING.search(line), line


def _flag_texts(path: Path) -> list[int]:
    """Lines where an error raised or a warning given writes a command-line flag itself."""
    flag = re.compile(r"(?<![\w-])--[a-z]")
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        call = node.exc if isinstance(node, ast.Raise) else node if (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "warn") else None
        if not isinstance(call, ast.Call):
            continue
        for part in ast.walk(call):
            if isinstance(part, ast.Constant) and isinstance(part.value, str) and flag.search(part.value):
                found.append(part.lineno)
    return found


def test_errors_name_run_fields_and_only_the_cli_names_flags():
    """A run field in an error is ``errors.run_field(name)``: the command line shows its flag, a
    Python caller the keyword argument. Only the CLI writes flags."""
    for path in ROOT.rglob("*.py"):
        if path.parent.name != "cli":
            assert not _flag_texts(path), f"{path.relative_to(ROOT.parent)}: lines {_flag_texts(path)} write a flag"


def test_the_flag_check_finds_a_flag_in_an_error(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('def f(x):\n    raise ConfigError(f"lower --batch to {x}", field="batch")\n')
    assert _flag_texts(sample) == [2]


# The engine's shortcuts (fast-forward, gap filling, replay, and what they keep and ask): the
# plain engine does not import them; the scheduler installs them through one seam.
SHORTCUTS = {"fastforward", "gapfill", "replay", "watch", "neighbours", "shortcuts"}
SEAM = {"scheduler": {"shortcuts"}}


def _runtime_imports(path: Path) -> set[str]:
    """The modules ``path`` imports when it runs (not those imported for type checking only)."""
    tree = ast.parse(path.read_text())
    checking = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                and ast.unparse(node.test) == "TYPE_CHECKING" for n in ast.walk(node)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in checking:
            continue
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_the_plain_engine_does_not_import_the_shortcuts():
    for path in sorted((ROOT / "engine").glob("*.py")):
        if path.stem in SHORTCUTS:
            continue
        reached = {m.split(".")[2] for m in _runtime_imports(path) if m.startswith("memsim.engine.")}
        assert reached & SHORTCUTS <= SEAM.get(path.stem, set()), f"engine/{path.name} imports {reached & SHORTCUTS}"


SIMPY_INTERNALS = ("._queue", "._eid", "._now", "._ok", "._value", "._env", "_defused", "PENDING", "heappush")


def test_simpy_internals_only_in_simpy_fast():
    """Where the engine goes past SimPy's public API, it does so in one module (its docstring
    says what it relies on; tests/engine/test_simpy_fast.py pins the SimPy versions)."""
    for path in sorted((ROOT / "engine").glob("*.py")):
        if path.name != "simpy_fast.py":
            text = path.read_text()
            assert not [s for s in SIMPY_INTERNALS if s in text], f"engine/{path.name} reaches into SimPy"


def test_the_architecture_page_names_every_engine_module():
    row = next(cells for cells in _module_table() if "`memsim/engine/`" in cells)
    line = next(line for line in DOC.read_text().splitlines() if line.startswith(f"| {row} |"))
    for path in sorted((ROOT / "engine").glob("*.py")):
        if path.stem != "__init__":
            assert f"`{path.name}`" in line, f"docs/architecture.md's engine row does not name {path.name}"


# The memsim imports made inside a function, each with its reason; every other memsim import is at the
# top of its module, so what a module needs is read in one place.
IMPORTED_LATE = {
    ("cli/console.py", "memsim.cli.main"): "the console's entry catches a Ctrl-C that lands while the libraries load",
    ("cli/console.py", "memsim.cli.commands"): "as memsim.cli.main: --help and --version load under the same catch",
}


def _function_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for sub in ast.walk(node):
                if isinstance(sub, ast.ImportFrom) and sub.module and sub.module.startswith("memsim"):
                    found.add(sub.module)
                elif isinstance(sub, ast.Import):
                    found |= {a.name for a in sub.names if a.name.startswith("memsim")}
    return found


def test_memsim_is_imported_at_the_top_of_a_module_but_where_a_reason_is_given():
    late = {(str(path.relative_to(ROOT)), mod) for path in ROOT.rglob("*.py") for mod in _function_imports(path)}
    assert late == set(IMPORTED_LATE), late ^ set(IMPORTED_LATE)


def test_no_import_circle_and_no_private_name_across_modules():
    """The modules' top-level imports form no circle (a package's own __init__ aside), and no module
    imports another's private name."""
    import networkx as nx

    modules = {".".join(p.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__"): p
               for p in ROOT.rglob("*.py")}
    graph = nx.DiGraph()
    for name, path in modules.items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("memsim"):
                for alias in node.names:
                    assert not alias.name.startswith("_") or alias.name == "__version__", (name, alias.name)
                    sub = f"{node.module}.{alias.name}"
                    graph.add_edge(name, sub if sub in modules else node.module)
            elif isinstance(node, ast.Import):
                graph.add_edges_from((name, a.name) for a in node.names if a.name.startswith("memsim"))
    graph.remove_edges_from(nx.selfloop_edges(graph))
    assert list(nx.simple_cycles(graph)) == []


def test_the_circle_check_finds_a_circle(tmp_path):
    import networkx as nx

    graph = nx.DiGraph([("memsim.run.api", "memsim.sweep.runner"), ("memsim.sweep.runner", "memsim.run.api")])
    assert list(nx.simple_cycles(graph))


def test_the_serving_loop_asks_a_step_model_and_never_the_api():
    """Serving times its steps through ``serving.model.StepModel`` (the pipeline's stages directly): no
    module of ``serving/`` imports ``run.api``, the orchestrator of one run."""
    for path in sorted((ROOT / "serving").glob("*.py")):
        assert "memsim.run.api" not in _runtime_imports(path), path.name

