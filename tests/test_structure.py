"""The shape of the code: no import circles (module level and inside functions), no file over ~500
lines in `decoding/` and `app/`, and nothing that points out of the repository."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("decoding", "app", "distill")
MAX_LINES = 500
LONG_FILES: dict[str, str] = {}  # repo-relative path -> why it may be longer


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def import_graph(root: Path, packages=PACKAGES) -> dict[str, set[str]]:
    """module -> the project modules it imports anywhere in its body (functions included); importing
    a.b.c also runs the packages a and a.b, so those count as imported too."""
    files = {_module_name(p, root): p for pkg in packages for p in (root / pkg).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        is_pkg = path.name == "__init__.py"
        package = name if is_pkg else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in files else mod for a in node.names]
            for t in targets:
                while t and t not in files:  # `import a.b.c` of a non-module name: its module
                    t = t.rpartition(".")[0]
                parts = t.split(".")
                for i in range(1, len(parts) + 1):
                    dep = ".".join(parts[:i])
                    if dep in files and dep != name and not name.startswith(dep + "."):
                        deps.add(dep)
        graph[name] = deps
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    graph = import_graph(ROOT)
    assert len(graph) > 50 and "decoding.methods" in graph["decoding.runner"]
    assert import_cycles(graph) == []


def test_the_cycle_check_finds_a_circle_through_a_function_import(tmp_path):
    pkg = tmp_path / "decoding"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import helper\n")
    (pkg / "b.py").write_text("def helper():\n    from . import a\n    return a\n")
    (pkg / "c.py").write_text("import decoding.a\n")
    cycles = import_cycles(import_graph(tmp_path, ("decoding",)))
    assert cycles == [["decoding.a", "decoding.b"]]


def test_files_have_one_job_and_stay_short():
    long = {}
    for pkg in ("decoding", "app"):
        for path in (ROOT / pkg).rglob("*.py"):
            rel = str(path.relative_to(ROOT))
            n = len(path.read_text(encoding="utf-8").splitlines())
            if n > MAX_LINES and rel not in LONG_FILES:
                long[rel] = n
    assert long == {}


# Paths of a machine: the checkout's own parent folder (the shared texts sit beside the checkout;
# at the file-system root the checkout itself) and the usual home folders of any machine.
MACHINE_PATH = ROOT.parent if ROOT.parent != ROOT.parent.parent else ROOT
POINTERS = re.compile(r"shared/|issue [0-9]|\b00[0-4]_|DESIGN\.md|/(home|root|Users|mnt)/|"
                      + re.escape(f"{MACHINE_PATH}/"))
SCANNED = ("decoding", "app", "distill", "docs", "assets", "benchmarks", "scripts", "experiments", "README.md",
           "Makefile")


@pytest.mark.parametrize("top", SCANNED)
def test_nothing_points_out_of_the_repository(top):
    base = ROOT / top
    files = [base] if base.is_file() else [p for p in base.rglob("*") if p.is_file()]
    found = []
    for path in files:
        if path.suffix in (".pt", ".safetensors", ".png") or path.stat().st_size > 5_000_000:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if POINTERS.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert found == []
