"""The engine's shape, read from the source (ast, nothing imported): no import circles (module level and
inside functions), every import of `decoding` goes down its layer table (`decoding.LAYERS`) or stays
in its layer, the engine imports neither the app nor the trainers nor Gradio, and every package's
docstring opens with a map naming each of its files."""

import ast
import re
from pathlib import Path

import pytest

from decoding import LAYERS

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("decoding", "app", "training")
ABOVE_THE_ENGINE = ("app", "training", "gradio")  # what `decoding` never imports


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(name: str, path: Path, files) -> list[tuple[int, str]]:
    """(line, dotted name) of everything the module at `path` imports, anywhere in its body; for
    `from package import name` the submodule where `package.name` is one."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found += [(node.lineno, f"{mod}.{a.name}" if f"{mod}.{a.name}" in files else mod) for a in node.names]
    return found


def import_graph(root: Path, packages=PACKAGES) -> dict[str, set[str]]:
    """module -> the project modules it imports anywhere in its body (functions included); importing
    a.b.c also runs the packages a and a.b, so those count as imported too."""
    files = {_module_name(p, root): p for pkg in packages for p in (root / pkg).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        deps: set[str] = set()
        for _, t in _imports(name, path, files):
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


def layer_of(module: str, layers=LAYERS) -> tuple[int, str] | None:
    """(index, name) of the layer holding `decoding.<...>` module `module`; the bare package `decoding`
    (its __init__ holds the table only) is layer 0; None for a module in no layer."""
    if module == "decoding":
        return 0, layers[0][0]
    rest = module.split(".", 1)[1]
    for i, (layer, members) in enumerate(layers):
        if any(rest == m or rest.startswith(m + ".") for m in members):
            return i, layer
    return None


def layer_violations(root: Path, layers=LAYERS) -> list[str]:
    """One readable line per import of `decoding` that goes up its layer table, per engine module in
    no layer, and per import of what sits above the engine."""
    files = {_module_name(p, root): p for p in (root / "decoding").rglob("*.py")}
    problems = []
    for name, path in sorted(files.items()):
        rel = path.relative_to(root)
        here = layer_of(name, layers)
        if here is None:
            problems.append(f"{rel} is in no layer: put it in a layer's package or add it to decoding.LAYERS")
            continue
        for line, target in _imports(name, path, files):
            top = target.split(".")[0]
            if top in ABOVE_THE_ENGINE:
                problems.append(f"{rel}:{line} imports {target}: the engine never imports the app, the trainers "
                                "or Gradio")
                continue
            if top != "decoding":
                continue
            there = layer_of(target, layers)
            if there is not None and there[0] > here[0]:
                problems.append(f"{rel}:{line} imports {target} (layer {there[0]}, {there[1]}) from layer "
                                f"{here[0]}, {here[1]}: a module may import only from its own layer or lower "
                                "ones (decoding.LAYERS); move the smaller piece down a layer instead")
    return problems


def test_no_import_cycles():
    graph = import_graph(ROOT)
    assert len(graph) > 50 and "decoding.methods" in graph["decoding.run.runner"]
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


def test_every_engine_import_goes_down_the_layers():
    problems = layer_violations(ROOT)
    assert not problems, "imports against the layers:\n" + "\n".join(problems)


def test_the_layer_check_names_an_import_that_goes_up(tmp_path):
    pkg = tmp_path / "decoding"
    for sub in ("low", "high"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "high" / "fine.py").write_text("from ..low import base\n")
    (pkg / "low" / "base.py").write_text("import json\n\n\ndef helper():\n"
                                        "    from ..high.fine import x\n    return x\n")
    (pkg / "low" / "shows.py").write_text("import gradio\n")
    (pkg / "stray.py").write_text("")
    layers = (("low", ("low",)), ("high", ("high",)))
    problems = layer_violations(tmp_path, layers)
    assert problems == [
        "decoding/low/base.py:5 imports decoding.high.fine (layer 1, high) from layer 0, low: a module may import "
        "only from its own layer or lower ones (decoding.LAYERS); move the smaller piece down a layer instead",
        "decoding/low/shows.py:1 imports gradio: the engine never imports the app, the trainers or Gradio",
        "decoding/stray.py is in no layer: put it in a layer's package or add it to decoding.LAYERS",
    ]


def test_the_layer_table_names_what_exists_and_the_root_holds_only_it():
    named = {m for _, members in LAYERS for m in members}
    root = {p.stem if p.is_file() else p.name for p in (ROOT / "decoding").iterdir()
            if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
    assert root == named


def _package_inits():
    for top in ("decoding", "training"):
        yield from sorted((ROOT / top).rglob("__init__.py"))


@pytest.mark.parametrize("init", list(_package_inits()), ids=lambda p: str(p.parent.relative_to(ROOT)))
def test_every_package_docstring_maps_its_files(init):
    """The docstring of a package's __init__ names each of its modules (`name.py`) and subpackages
    (`name/`), and a layer package's opens with its place in the table."""
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
    package = init.parent
    children = [p.name for p in package.glob("*.py") if p.name != "__init__.py"]
    children += [p.name + "/" for p in package.iterdir() if (p / "__init__.py").is_file()]
    missing = [c for c in sorted(children) if not re.search(rf"(?<![\w/]){re.escape(c)}", doc)]
    assert missing == [], f"{init.relative_to(ROOT)}'s map does not name {missing}"
    if package.parent == ROOT / "decoding":
        index = [i for i, (_, members) in enumerate(LAYERS) if package.name in members]
        assert doc.startswith(f"Layer {index[0]}, "), f"{init.relative_to(ROOT)} should open with 'Layer {index[0]}, '"
