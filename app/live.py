"""A session's live run, the app's glue to the engine: settings from the controls, the model pair,
starting, advancing and finishing the run. Errors a user can cause become visible gr.Error messages.
"""

from __future__ import annotations

import gradio as gr

from decoding.methods.registry import METHODS, method_view

from decoding.errors import keyed

from .i18n_errors import app_error
from .presets import MAX_PARAMS, fitting_preset, pair_problem, presets, resolve_pair
from .session import Session
from .settings import Settings, make_settings
from .zerogpu import load_run_pair, on_zerogpu, whole_run


def settings_from_values(values: dict, method: str | None = None) -> Settings:
    """Checked Settings from a handler's input values (`controls.run_input_names`)."""
    method = values["method"] if method is None else method
    try:
        target, draft = resolve_pair(values["preset"], values["custom_target"], values["custom_draft"])
    except ValueError as exc:
        raise app_error("model.detail", "title.pair", detail=exc) from None
    if pair_problem(method, draft):
        near, why = fitting_preset(method, values["preset"], values["custom_draft"] or "")
        # the words are made in the reader's language (i18n_errors renders a callable parameter)
        if near is not None:
            raise app_error("pair.choose", "title.pair_method", pair=near.label,
                            problem=lambda lang: pair_problem(method, draft, lang))
        raise app_error("model.detail", "title.pair_method",
                        detail=lambda lang: fitting_preset(method, values["preset"], values["custom_draft"] or "",
                                                           lang)[1])
    try:
        return make_settings(values["prompt"], values["chat"], method, values["gamma"], values["temperature"],
                             values["top_k"], values["top_p"], values["lenience"], values["seed"],
                             values["max_new_tokens"], target, draft, values, dtype=values.get("dtype") or "auto")
    except ValueError as exc:
        raise app_error("model.detail", "title.settings", detail=exc) from None


def load_models(target_spec: str, draft_spec: str, need_draft: bool, progress=None, dtype: str = "auto"):
    """The (memoized) target in `dtype` and its pair.Draft (None when not needed); gr.Error with the
    loader's reason."""
    from decoding.lm.models import ModelLoadError

    def reporter(offset, label):
        def report(fraction, message):
            if progress is not None:
                progress(offset + 0.5 * float(fraction), desc=f"{label}: {message}")
        return report

    preset_specs = {p.target for p in presets()} | {p.draft for p in presets()}
    if on_zerogpu() and not {target_spec, draft_spec if need_draft else target_spec} <= preset_specs:
        raise app_error("model.custom_off", "title.custom_off")
    try:
        target, draft = load_run_pair(target_spec, draft_spec, need_draft, dtype,
                                      target_progress=reporter(0.0, "target"), draft_progress=reporter(0.5, "draft"))
    except ModelLoadError as exc:
        raise app_error("model.could_not_load", "title.not_loaded", detail=exc) from None
    models = [(target, target_spec)] + ([(draft.model, draft_spec)] if draft is not None and draft.model else [])
    for m, spec in models:
        if spec not in preset_specs and m.n_params > MAX_PARAMS:
            raise app_error("model.too_large", "title.too_large", name=m.name, size=f"{m.n_params / 1e9:.1f}",
                            limit=f"{MAX_PARAMS / 1e9:.1f}")
    return target, draft


def check_prompt_fits(prompt_tokens: int, max_new_tokens: int, context: int) -> None:
    """The prompt and the tokens to generate must fit the model's context; ValueError otherwise."""
    room = context - max_new_tokens
    if prompt_tokens > room:
        raise keyed(f"The prompt is {prompt_tokens} tokens long; with max new tokens {max_new_tokens} this "
                    f"model's context of {context} tokens allows at most {max(room, 0)} prompt tokens.",
                    "settings.prompt_room", length=prompt_tokens, max_new=max_new_tokens, context=context,
                    room=max(room, 0))


def start(session: Session, settings: Settings, progress):
    """Load the pair, start a live run of `settings` and decode its first iteration; the session
    takes the run only then. All or nothing: a pair that cannot load, a prompt that does not fit or
    a first iteration that fails raises gr.Error with the session untouched (its previous run still
    shown and on the timeline). Returns the first record (None when the run made none)."""
    from decoding.eval.energy import make_meter
    from decoding.run.runner import decode

    need_draft = METHODS[settings.method].uses_drafter
    target, draft = load_models(settings.target, settings.draft, need_draft, progress, settings.dtype)
    meter = None
    try:
        prompt_ids = target.encode_prompt(settings.prompt, settings.chat)
        check_prompt_fits(len(prompt_ids), settings.max_new_tokens, target.max_context)
        if on_zerogpu():
            # one GPU call decodes the whole run; Step and Run then reveal its records from memory
            generator = iter(list(whole_run(settings)))
        else:
            meter = make_meter(target.device)
            generator = decode(target, draft, prompt_ids, settings.config(), meter)
        first = next(generator, None)
    except ValueError as exc:
        _close(meter)
        raise app_error("model.detail", "title.prompt" if "prompt" in str(exc) else "title.cannot_start",
                        detail=exc) from None
    except Exception:
        _close(meter)
        raise
    session.reset_run()
    session.meter = meter
    session.generator = generator
    session.settings = settings
    session.source = "live"
    session.title = ""
    session.target = target
    session.draft = draft
    session.target_bytes = target.weight_bytes
    session.draft_bytes = draft.weight_bytes if draft is not None and draft.n_params else None
    if first is None:
        finish(session)
        return None
    session.records.append(first)
    if first.finished:
        finish(session)
    return first


def _close(meter) -> None:
    if meter is not None:
        try:
            meter.close()
        except Exception:  # noqa: BLE001
            pass


def advance(session: Session):
    """The next record of the live run, or None when it has ended (or was replaced meanwhile: another
    event reset the session while this iteration decoded; its record then belongs to no run)."""
    generator, token = session.generator, session.run_token
    if generator is None:
        return None
    try:
        record = next(generator)
    except StopIteration:
        if session.run_token == token:
            finish(session)
        return None
    except ValueError as exc:
        if "already executing" in str(exc):
            raise app_error("model.busy") from None
        raise app_error("model.stopped", detail=exc) from None
    if session.run_token != token:
        return None
    session.records.append(record)
    if record.finished:
        finish(session)
    return record


def finish(session: Session, stop_reason: str | None = None) -> None:
    """Summarize the live run (its baseline speed kept for the theory panel), close its meter and
    release what only the running decode needed (`Session.release_run`: its generator with the KV
    caches, kept hidden states and drafter; the records packed), then hand the freed memory back
    to the system (`procstat.release_free_memory`)."""
    from decoding.eval.procstat import release_free_memory
    from decoding.run.runner import summarize

    if not session.records or session.target is None or session.settings is None:
        return
    config = session.settings.config()
    session.summary = summarize(session.records, config, session.settings.prompt, session.target,
                                session.draft, stop_reason)
    if method_view(session.settings.method).baseline and session.summary.stop_reason != "stopped":
        session.baselines[session.settings.target] = session.summary.tokens_per_second
    _close(getattr(session, "meter", None))
    session.release_run()
    release_free_memory()
