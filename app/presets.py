"""The model-pair presets of the app and the checks on a custom pair (no Gradio here).

On a CPU the offline default is the hybrid drafter with the feature draft (measured below; the
hybrid with the distilled draft where the feature draft is not shipped). On a GPU the first preset is
the drafter the GPU check measured fastest there (`decoding/eval/gpu_check/choice.py`,
assets/gpu-choice.json), with what it measured in its note; until a check has run, the presets make
no GPU speed claim and say how to measure one.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path

from decoding.errors import keyed
from decoding.lm.models import DEFAULT_TARGET
from decoding.run.pair import FEATURE, HYBRID, PROMPT_LOOKUP
from decoding.paths import SHIPPED_DRAFT, SHIPPED_FEATURE_DRAFT

# Preset notes are shown under the pair's dropdown: whole sentences a student can read.
OFFLINE = "Runs without a network (the first load prepares the model, about 20 s)."
HUB = "Downloads the models from the Hugging Face Hub on first use."
MAX_PARAMS = float(os.environ.get("SPECDEC_APP_MAX_PARAMS", 2.0e9))  # custom models above this are refused


@dataclass(frozen=True)
class Preset:
    key: str
    label: str
    target: str
    draft: str
    chat: bool
    note: str = ""
    note_key: str = ""  # the note's catalog key (explainer.preset.<key>), where the note is that text
    draft_tree: str | None = None  # the speculative method's draft tree this preset sets (None: leaves it as it is)


def preset_note(p: "Preset | None", lang: str | None = None) -> str:
    """A preset's note in `lang`: its catalog text where the note is the English of its key, else the
    note as it is (a GPU's measured note, a configured pair's)."""
    from .i18n import t

    if p is None or not p.note:
        return ""
    if p.note_key and t(p.note_key, "en") == p.note:
        return t(p.note_key, lang)
    return p.note


def _presets() -> list[Preset]:
    env_target = os.environ.get("SPECDEC_APP_TARGET")
    env_draft = os.environ.get("SPECDEC_APP_DRAFT")
    # the hybrid: 1.38x plain decoding against the distilled draft's 1.01x on Spec-Bench at 64 new tokens
    # (docs/performance.md; 1.35-1.41x over five runs)
    hybrid = Preset("default-hybrid", "Offline: SmolLM2-135M-Instruct, drafted by the hybrid: copies where "
                    "the text repeats, the distilled 16.8M draft elsewhere", DEFAULT_TARGET, HYBRID, True,
                    f"{OFFLINE} Where the text repeats itself (summaries, answers from a passage) it copies the span "
                    "that followed; elsewhere the 16.8M draft model guesses.", "explainer.preset.hybrid")
    distilled = Preset("default", "Offline: SmolLM2-135M-Instruct, drafted by the distilled 16.8M draft",
                       DEFAULT_TARGET, str(SHIPPED_DRAFT), True,
                       f"{OFFLINE} Every draft token comes from the 16.8M draft model.", "explainer.preset.distilled")
    feature = Preset("default-feature", "Offline: SmolLM2-135M-Instruct, drafted by the feature draft (EAGLE): "
                     "one layer over the target's own hidden states", DEFAULT_TARGET, str(SHIPPED_FEATURE_DRAFT), True,
                     f"{OFFLINE} The feature draft guesses from the target's own last hidden states and scores "
                     "tokens with the target's own output layer.", "explainer.preset.feature")
    # the offline default where the feature draft is shipped: on a class's chat prompts it ran 1.15x plain
    # decoding at gamma 4 (1.25x at auto) where the hybrid ran 0.97x (1.07x) and the distilled draft alone
    # 0.97x (1.10x) (temperature 0.7, bfloat16: docs/bench/classroom-bfloat16), and 1.44x against the hybrid's
    # 1.38x on Spec-Bench (docs/performance.md)
    hybrid_feature = Preset("default-hybrid-feature", "Offline: SmolLM2-135M-Instruct, drafted by the hybrid with the "
                            "feature draft: copies where the text repeats, the feature draft elsewhere", DEFAULT_TARGET,
                            f"{HYBRID}:{FEATURE}", True, f"{OFFLINE} Where the text repeats itself (summaries, "
                            "answers from a passage) it copies the span that followed; elsewhere the feature draft "
                            "(one layer over the target's own hidden states) guesses.",
                            "explainer.preset.hybrid_feature")
    # the feature draft drawing a tree of guesses per iteration (decoding/methods/tree_draft.py), this device's
    # tuned size where one was measured (auto)
    feature_tree = Preset("default-feature-tree", "Offline: SmolLM2-135M-Instruct, feature draft, tree of guesses",
                          DEFAULT_TARGET, str(SHIPPED_FEATURE_DRAFT), True,
                          f"{OFFLINE} The feature draft proposes several guesses for each position, a tree of its "
                          "likeliest continuations, and the target checks the whole tree in one pass.",
                          "explainer.preset.feature_tree", draft_tree="auto")
    lookup = Preset("default-lookup", "Offline: SmolLM2-135M-Instruct, drafted by prompt lookup (no draft model)",
                    DEFAULT_TARGET, PROMPT_LOOKUP, True,
                    f"{OFFLINE} It copies from the context, so it drafts only where the text repeats.",
                    "explainer.preset.lookup")
    if env_target:
        configured = Preset("default", f"Configured pair: {Path(env_target).name} + "
                            f"{Path(env_draft).name if env_draft else PROMPT_LOOKUP}", env_target,
                            env_draft or PROMPT_LOOKUP, False, "The pair this app was started with.",
                            "explainer.preset.configured")
        offline = (configured, hybrid, lookup)
    else:
        offline = (hybrid, distilled, lookup)
        if (SHIPPED_FEATURE_DRAFT / "config.json").is_file():
            offline = (hybrid_feature, *offline, feature, feature_tree)
        first = offline[0]
        offline = (dataclasses.replace(first, label=first.label.replace("Offline: ", "Offline default: ", 1)),
                   *offline[1:])
        if _on_gpu():
            offline = _gpu_order(*offline)
    return [
        *offline,
        Preset("smollm2-360m", "SmolLM2-135M-Instruct → SmolLM2-360M-Instruct (hub)",
               "HuggingFaceTB/SmolLM2-360M-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct", True, HUB,
               "explainer.preset.hub"),
        Preset("smollm2-1.7b", "SmolLM2-135M-Instruct → SmolLM2-1.7B-Instruct (hub)",
               "HuggingFaceTB/SmolLM2-1.7B-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct", True, HUB,
               "explainer.preset.hub"),
        Preset("qwen2.5", "Qwen2.5-0.5B-Instruct → Qwen2.5-1.5B-Instruct (hub)",
               "Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct", True, HUB, "explainer.preset.hub"),
        Preset("gpt2", "distilgpt2 → gpt2-large (hub)", "openai-community/gpt2-large", "distilbert/distilgpt2", False,
               f"{HUB} These models have no chat template.", "explainer.preset.hub_no_chat"),
        Preset("custom", "Custom: type a target and a draft below", "", "", False,
               "Type a Hugging Face Hub id (owner/name) for each model; 'prompt-lookup' as the draft needs no "
               "model.", "explainer.preset.custom"),
    ]


GPU_FIRST = "GPU default: "
DRAFTER_KEYS = {"hybrid": "default-hybrid", "distilled": "default", "prompt-lookup": "default-lookup",
                "feature": "default-feature", "hybrid-feature": "default-hybrid-feature"}


def _on_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def _gpu_order_unmeasured(*offline: Preset) -> tuple[Preset, ...]:
    first, *rest = offline
    note = f"{first.note} Not measured on a GPU yet, so no GPU speed is claimed."
    return (dataclasses.replace(first, note=note), *rest)


def _gpu_order(*offline: Preset) -> tuple[Preset, ...]:
    """The offline presets as a GPU shows them: the measured fastest drafter first, labelled as the
    GPU default with what it measured, or, with no measurement, the same order and the default's
    note saying that none was made."""
    from decoding.eval.gpu_check.choice import read_choice

    choice = read_choice()
    if choice is None:
        return _gpu_order_unmeasured(*offline)
    key = DRAFTER_KEYS[choice["drafter"]]
    if not any(p.key == key for p in offline):  # a drafter this app does not offer (its draft is not shipped)
        return _gpu_order_unmeasured(*offline)
    measured = (f"Measured on {choice.get('device') or 'this GPU'} in {choice.get('dtype')}: "
                f"{choice['speedup']:.2f}x the speed of plain decoding at γ {choice.get('gamma')}.")
    chosen = next(p for p in offline if p.key == key)
    first = dataclasses.replace(chosen, label=GPU_FIRST + chosen.label.removeprefix("Offline default: ")
                                .removeprefix("Offline: "), note=measured)
    rest = (dataclasses.replace(p, label=p.label.replace("Offline default: ", "Offline: "))
            for p in offline if p.key != key)
    return (first, *rest)


def presets() -> list[Preset]:
    """The model-pair presets, read when called (tests set SPECDEC_APP_TARGET before building)."""
    return _presets()


def preset_by_label(label: str) -> Preset | None:
    return next((p for p in presets() if p.label == label), None)


def resolve_pair(preset_label: str, custom_target: str, custom_draft: str) -> tuple[str, str]:
    """(target spec, draft spec) for a preset, or the custom fields, checked for safety."""
    preset = preset_by_label(preset_label)
    if preset is None:
        raise keyed(f"unknown model pair {preset_label!r}", "model.unknown_pair", label=repr(preset_label))
    if preset.key != "custom":
        return preset.target, preset.draft
    target = (custom_target or "").strip()
    draft = (custom_draft or "").strip() or PROMPT_LOOKUP
    if not target:
        raise keyed("type a target model (a hub id such as HuggingFaceTB/SmolLM2-360M-Instruct)", "model.no_target")
    for spec in (target, draft):
        check_custom_spec(spec)
    return target, draft


_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$|^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


def check_custom_spec(spec: str) -> None:
    """A public demo loads hub ids only; local paths need SPECDEC_APP_ALLOW_LOCAL=1."""
    if spec in (PROMPT_LOOKUP, DEFAULT_TARGET, HYBRID):
        return
    if os.environ.get("SPECDEC_APP_ALLOW_LOCAL") == "1":
        return
    if not _HUB_ID.match(spec) or ".." in spec:
        raise keyed(f"{spec!r} is not a hub id (owner/name); local paths are disabled in this app",
                    "model.not_hub_spec", spec=repr(spec))


# --------------------------------------------------------------------------- method and pair fit
def draft_is_model(spec: str) -> bool:
    """Whether the draft `spec` is a draft model of its own (what MJSD beam-searches): not prompt
    lookup, not the hybrid (lookup first), not a feature draft (one layer over the target's states)."""
    from decoding.drafters.feature import is_feature_draft

    spec = (spec or "").strip()
    if not spec or spec == PROMPT_LOOKUP or spec == FEATURE:
        return False
    if spec.partition(":")[0].partition("=")[0] in (HYBRID, f"{HYBRID}+corpus"):
        return False
    return not is_feature_draft(spec)


def pair_problem(method: str, draft_spec: str, lang: str | None = None) -> str:
    """Why the pair with the draft `draft_spec` cannot run `method`, or "" when it can. Only MJSD
    has a requirement here: PPD drafts with the target's own prompt tokens (trained ones where the
    target ships them, untrained ones otherwise) and ignores the draft; the other methods take any
    drafter. In `lang` (None: the event's language)."""
    from decoding.methods.registry import METHODS

    from .i18n import t

    spec = METHODS.get(method)
    if spec is not None and spec.needs_draft_model and not draft_is_model(draft_spec):
        return t("explainer.pair.needs_model", lang, method=spec.title, drafter=_drafter_words(draft_spec, lang))
    return ""


def _drafter_words(draft_spec: str, lang: str | None = None) -> str:
    from .i18n import t

    if draft_spec == PROMPT_LOOKUP:
        return t("explainer.pair.by_lookup", lang)
    if draft_spec.partition(":")[0].startswith(HYBRID):
        return t("explainer.pair.by_hybrid", lang)
    return t("explainer.pair.by_feature", lang)


def fitting_preset(method: str, label: str, custom_draft: str = "",
                   lang: str | None = None) -> tuple[Preset | None, str]:
    """(the preset to switch to, what to tell the user) when the pair `label` (its custom draft for
    the custom pair) cannot run `method`: the first preset with the same target that can, else the
    first that can at all. (None, "") when the pair fits; (None, why) when no preset fits. In `lang`."""
    from .i18n import t

    preset = preset_by_label(label)
    if preset is None:
        return None, ""
    draft = custom_draft.strip() if preset.key == "custom" else preset.draft
    problem = pair_problem(method, draft, lang)
    if not problem:
        return None, ""
    if preset.key == "custom":
        return None, t("explainer.pair.type_draft", lang, problem=problem)
    fits = [p for p in presets() if p.key != "custom" and not pair_problem(method, p.draft, lang)]
    near = next((p for p in fits if p.target == preset.target), fits[0] if fits else None)
    if near is None:
        return None, t("explainer.pair.none_fits", lang, problem=problem)
    return near, t("explainer.pair.switched", lang, problem=problem, pair=near.label)


def preset_for_models(target_name: str | None, draft_name: str | None) -> Preset | None:
    """The preset whose target and draft a saved run used (by the names a trace records), or None."""
    from decoding.lm.models import DEFAULT_TARGET_HUB_ID

    def name(spec: str) -> str:
        return Path(DEFAULT_TARGET_HUB_ID).name if spec == DEFAULT_TARGET else Path(spec).name

    for p in presets():
        if p.key == "custom" or name(p.target) != target_name:
            continue
        if (draft_name or PROMPT_LOOKUP) in (p.draft, name(p.draft)):
            return p
    return None
