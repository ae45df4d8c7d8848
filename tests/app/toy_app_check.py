"""Run in a process of its own by test_method_registry_views.py: registers the toy method (toy_method.py)
before the app is imported, as a method added to the registry would be, then builds the demo on the tiny
models ($SPECDEC_APP_TARGET / $SPECDEC_APP_DRAFT) and runs the toy through the Explainer's Run handler.
Prints one JSON object of what it found; the test asserts on it. (The app's handlers take their api
parameters from the registry when they are imported, hence a fresh process rather than a monkeypatch.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import toy_method  # noqa: E402

toy_method.register(lambda mapping, key, value: mapping.__setitem__(key, value))

import gradio as gr  # noqa: E402

from app.explainer import handlers  # noqa: E402
from app.controls import DEFAULTS, method_controls  # noqa: E402
from app.layout import build_demo  # noqa: E402
from app.presets import presets  # noqa: E402
from app.explainer.view import VIEW_OUTPUTS  # noqa: E402


def value(update):
    return update.get("value") if isinstance(update, dict) else update


def main() -> None:
    demo = build_demo()
    blocks = list(demo.blocks.values())
    method = next(b for b in blocks if getattr(b, "elem_id", None) == "method")
    floor = [b for b in blocks if getattr(b, "label", None) == toy_method.FLOOR_LABEL]
    run_fn = next(f for f in demo.fns.values() if f.api_name == "generate")
    values = {"preset": presets()[0].label, "custom_target": "", "custom_draft": "", "prompt": "the cat sat",
              "chat": False, **DEFAULTS, "method": toy_method.NAME, "temperature": 1, "max_new_tokens": 6,
              "pacing": 0, "position": 0, **{c.name: c.default for c in method_controls()}}
    values["toy_floor"] = 0.25
    outs = list(handlers.generate(None, *[values[n] for n in handlers.generate.input_names], None))
    last = outs[-1]
    out = dict(zip(VIEW_OUTPUTS, last[1:]))
    session = last[0]
    shown = handlers.on_method(toy_method.NAME, ("toy_floor", "gamma", "lenience"))
    print(json.dumps({
        "choices": [c[1] if isinstance(c, tuple) else c for c in method.choices],
        "floor_controls": len(floor),
        "floor_in_run_inputs": any(getattr(b, "label", None) == toy_method.FLOOR_LABEL for b in run_fn.inputs),
        "toy_floor_param": "toy_floor" in handlers.generate.input_names,
        "visible_on_pick": [bool(u.get("visible")) for u in shown],
        "status": str(last[-1]),
        "records": len(session.records),
        "methods": sorted({r.method for r in session.records}),
        "method_box": value(out["method_box"]) if not isinstance(out["method_box"], dict)
        else out["method_box"].get("visible"),
        "method_md": str(value(out["method_md"])),
        "method_html": str(value(out["method_html"])),
        "draft_row": str(value(out["draft_row"])),
        "cli": str(value(out["cli"])),
        "skip": [k for k, v in out.items() if v == gr.skip()],
    }))


if __name__ == "__main__":
    main()
