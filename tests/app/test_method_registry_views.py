"""What the app shows of a method comes from its registry entry (`MethodSpec.view`), never from its name:
no comparison in app/ against a registered method's name, and a toy method added in a test (one registry
entry and its own files: toy_method.py) shows in the CLI and the app, its panel drawn by the generic
fallback (its trace data as a table), with no change to either."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from _siblings import load_test_module

from decoding.methods.registry import METHODS, MethodView, baseline_method, method_view

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app"
toy_method = load_test_module("app/toy_method.py")


def _names(node: ast.AST) -> list[str]:
    """The string constants of `node`: itself, or the items of a tuple, list or set literal."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [n.value for n in items if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def method_name_comparisons(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, method name) of every comparison in `source` against a name in `names`: `x == "ppd"`,
    `"ppd" != x`, `x in ("mjsd", "ppd")`, `x not in {"speculative"}`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                found += [(node.lineno, s) for s in _names(operand) if s in names]
    return found


def test_the_scan_finds_each_form_of_comparison():
    names = {"ppd", "mjsd", "autoregressive"}
    source = ('a = m == "ppd"\nb = "mjsd" != m\nc = m in ("speculative", "ppd")\nd = m not in {"autoregressive"}\n'
              'e = m == "tree"\nf = {"ppd": 1}.get(m)\n')
    assert method_name_comparisons(source, names) == [(1, "ppd"), (2, "mjsd"), (3, "ppd"), (4, "autoregressive")]


def test_no_app_module_compares_a_method_name():
    names = set(METHODS)
    found = [f"{path.relative_to(ROOT)}:{line} compares with {name!r}"
             for path in sorted(APP.rglob("*.py"))
             for line, name in method_name_comparisons(path.read_text(encoding="utf-8"), names)]
    assert not found, "read the registry's view (decoding.methods.view.MethodView) instead:\n" + "\n".join(found)


def test_every_method_has_a_view_and_one_is_the_baseline():
    assert all(isinstance(spec.view, MethodView) for spec in METHODS.values())
    assert [name for name, spec in METHODS.items() if spec.view.baseline] == [baseline_method()]
    assert method_view("no such method") == MethodView()  # a trace of another version reads with the defaults


def test_a_toy_method_shows_in_the_cli(monkeypatch, capsys, tiny_target_dir):
    from decoding.cli import main

    toy_method.register(monkeypatch.setitem)
    assert method_view(toy_method.NAME).panel == "margins"
    try:
        main(["generate", "--help"])
    except SystemExit as exc:
        assert exc.code == 0
    help_text = capsys.readouterr().out
    assert "--toy-floor" in help_text and "least this floor" in help_text
    assert "toy" in help_text.split("--method METHOD")[-1].split("--gamma GAMMA")[0]  # --method's help lists it
    rc = main(["generate", "--method", "toy", "--prompt", "the cat sat", "--target", str(tiny_target_dir),
               "--temperature", "0", "--max-new-tokens", "5", "--toy-floor", "0.2", "--dtype", "float32"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "[toy, float32] 5 tokens in 5 iterations, 5 target calls" in out.out
    rc = main(["generate", "--method", "toy", "--prompt", "the cat sat", "--target", str(tiny_target_dir),
               "--temperature", "1", "--max-new-tokens", "3", "--dtype", "float32", "--json"])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rc == 0 and len(lines) == 4 and lines[-1]["summary"] is True
    steps = [toy_method.ToyStep.from_dict(r["extra"]["toy"]) for r in lines[:-1]]
    assert all(s.floor == 0.5 and s.above_floor == (s.chosen_p >= 0.5) and 0 < s.chosen_p <= 1 for s in steps)
    rc = main(["generate", "--method", "toy", "--prompt", "x", "--target", str(tiny_target_dir), "--toy-floor", "2"])
    assert rc == 2 and "toy floor" in capsys.readouterr().err  # its own checks, before a model loads


def test_a_toy_method_shows_in_the_app(tiny_target_dir, tiny_draft_dir):
    env = {**os.environ, "SPECDEC_APP_TARGET": str(tiny_target_dir), "SPECDEC_APP_DRAFT": str(tiny_draft_dir),
           "SPECDEC_DTYPE": "float32", "GRADIO_ANALYTICS_ENABLED": "False",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    run = subprocess.run([sys.executable, str(Path(__file__).with_name("toy_app_check.py"))], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert "toy" in seen["choices"]  # the method dropdown offers it
    assert seen["floor_controls"] == 1 and seen["floor_in_run_inputs"] and seen["toy_floor_param"]  # its control
    assert seen["visible_on_pick"] == [True, False, False]  # its own control shows, gamma and lenience hide
    assert seen["records"] == 6 and seen["methods"] == ["toy"]
    assert "Error" not in seen["status"] and "error" not in seen["status"]
    assert seen["method_box"] is True and seen["method_md"].startswith("### Toy panel")  # the generic fallback
    html = seen["method_html"]
    for field in ("chosen p", "margin", "floor", "above floor"):
        assert f"<td>{field}</td>" in html
    assert "<td>0.250</td>" in html and "None" not in html  # its setting, in words
    assert "--method toy" in seen["cli"] and "--toy-floor 0.25" in seen["cli"]  # "copy as CLI command"
