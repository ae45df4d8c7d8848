"""A loaded model with its tokenizer and metadata: vocabulary width, context length, end-of-sequence
ids, prompt encoding (chat template) and token text as it reads after earlier text."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from .attention import use_fast_cpu_attention

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


@dataclass(eq=False)
class LoadedModel:
    """A causal LM ready for inference (eval mode, no grads) with its tokenizer and metadata."""

    spec: str  # what the user asked for ("default", hub id, path)
    name: str  # short display name, e.g. "SmolLM2-135M-Instruct"
    model: "PreTrainedModel" = field(repr=False)
    tokenizer: "PreTrainedTokenizerBase" = field(repr=False)
    device: torch.device
    dtype: torch.dtype
    source: str  # "gguf" | "gguf-cache" | "local" | "hub"
    n_params: int
    weight_bytes: int  # bytes of the parameters (an energy proxy)
    _token_text: dict[int, str] = field(default_factory=dict, init=False, repr=False)
    _anchor: list[int] | None = field(default=None, init=False, repr=False)
    _vocab_ids: dict[str, int | None] = field(default_factory=dict, init=False, repr=False)  # token text -> id

    @property
    def vocab_size(self) -> int:
        """Width of the model's logits (may exceed the tokenizer's length when padded)."""
        out = self.model.get_output_embeddings()
        weight = getattr(out, "weight", None)
        if weight is not None and weight.dim() == 2:
            return int(weight.shape[0])
        return int(text_config(self.model.config).vocab_size)

    @property
    def max_context(self) -> int:
        """Longest sequence (prompt + generation) the model's positions support."""
        cfg = text_config(self.model.config)
        for attr in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
            value = getattr(cfg, attr, None)
            if isinstance(value, int) and value > 0:
                return value
        tok_max = getattr(self.tokenizer, "model_max_length", None)
        if isinstance(tok_max, int) and 0 < tok_max < 10_000_000:
            return tok_max
        return 32_768

    def eos_token_ids(self, chat: bool) -> list[int]:
        """Ids that end a generation: the tokenizer's eos, the config's and generation config's
        eos ids, and with `chat` also ``<|im_end|>`` when the vocabulary has it."""
        ids: list[int] = []

        def add(value) -> None:
            if value is None:
                return
            if isinstance(value, (list, tuple, set)):
                for v in value:
                    add(v)
                return
            value = int(value)
            if value >= 0 and value not in ids:
                ids.append(value)

        add(self.tokenizer.eos_token_id)
        add(getattr(text_config(self.model.config), "eos_token_id", None))
        gen = getattr(self.model, "generation_config", None)
        if gen is not None:
            add(getattr(gen, "eos_token_id", None))
        if chat:
            add(self.vocab_id("<|im_end|>"))
        return ids

    def vocab_id(self, token: str) -> int | None:
        """The id of the vocabulary entry `token`, or None; looked up once per model (the tokenizer's get_vocab
        builds a dict of the whole vocabulary on every call: ~47 ms for a 49k vocabulary while a class's runs start)."""
        if token not in self._vocab_ids:
            self._vocab_ids[token] = self.tokenizer.get_vocab().get(token)
        return self._vocab_ids[token]

    def encode_prompt(self, prompt: str, chat: bool) -> list[int]:
        """Token ids of `prompt`; with `chat` wrapped as one user turn by the chat template,
        ending with the assistant header (``add_generation_prompt=True``)."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("prompt is empty")
        tok = self.tokenizer
        if chat:
            if not getattr(tok, "chat_template", None):
                raise ValueError(
                    f"model '{self.name}' has no chat template, so --chat cannot be used with it; "
                    "run without chat mode"
                )
            text = tok.apply_chat_template(
                [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False
            )
            # The template already wrote every special token it wants.
            return list(tok(text, add_special_tokens=False)["input_ids"])
        return list(tok(prompt, add_special_tokens=True)["input_ids"])

    def decode_token(self, token_id: int) -> str:
        """Text of one token as it appears when appended to earlier text (leading space kept;
        special tokens shown). Decoded after an anchor token because SentencePiece-style
        decoders drop the leading space of the first token."""
        token_id = int(token_id)
        cached = self._token_text.get(token_id)
        if cached is not None:
            return cached
        tok = self.tokenizer
        anchor = self._anchor_ids()
        kwargs = {"skip_special_tokens": False, "clean_up_tokenization_spaces": False}
        text = None
        if anchor:
            head = tok.decode(anchor, **kwargs)
            full = tok.decode(anchor + [token_id], **kwargs)
            if full.startswith(head):
                text = full[len(head):]
        if text is None:
            text = tok.decode([token_id], **kwargs)
        self._token_text[token_id] = text
        return text

    def _anchor_ids(self) -> list[int]:
        if self._anchor is None:
            try:
                ids = list(self.tokenizer("a", add_special_tokens=False)["input_ids"])
            except Exception:  # noqa: BLE001 - any tokenizer failure just disables the anchor
                ids = []
            self._anchor = [int(i) for i in ids[:1]]
        return self._anchor


def text_config(config):
    get = getattr(config, "get_text_config", None)
    return get() if callable(get) else config


def build_loaded(model, tokenizer, spec: str, name: str, source: str, device: torch.device,
                 dtype: torch.dtype, already_placed: bool) -> LoadedModel:
    """A LoadedModel from a freshly loaded model: on its device and dtype, eval mode, no gradients,
    with the attention kernel that is fastest there (`attention.py`)."""
    if not already_placed:
        model = model.to(device=device, dtype=dtype)
    model.eval()
    use_fast_cpu_attention(model)
    for param in model.parameters():
        param.requires_grad_(False)
    params = list(model.parameters())
    embed = model.get_input_embeddings()
    input_device = embed.weight.device if embed is not None else params[0].device
    return LoadedModel(
        spec=spec,
        name=name,
        model=model,
        tokenizer=tokenizer,
        device=input_device,
        dtype=params[0].dtype if params else dtype,
        source=source,
        n_params=sum(p.numel() for p in params),
        weight_bytes=model_weight_bytes(model),
    )


def model_weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of a model's parameters (tied weights counted once)."""
    return sum(p.numel() * p.element_size() for p in model.parameters())
