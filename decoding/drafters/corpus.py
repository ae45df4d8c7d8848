"""A corpus of the target's own earlier answers, as a draft source: copy what followed the same words.

Prompt lookup copies from the context; a corpus lookup copies from text the target wrote before, to
other prompts (SuffixDecoding keeps such text from earlier requests: Oliaro, Jia, Campos, Qiao,
"SuffixDecoding: A Model-Free Approach to Speeding Up Large Language Model Inference",
arXiv:2411.04975). A chat model reuses its phrasings ("Here are some tips to", "In conclusion,"),
so where the context ends in n tokens the corpus holds, the continuation the corpus saw most often
after them is a cheap guess. The shipped corpus (`assets/corpus-smollm2-135m`) holds the default
target's greedy answers to the project's own training prompts (`training/prompts_*.jsonl`, never
Spec-Bench), made by `scripts/build_corpus.py`.

Every n-gram of `GRAM_LENGTHS` in the corpus is indexed once at load time with its most frequent
next token and the latest place that token followed it, so a lookup is a few dictionary reads.
The proposal depends on the context only, so its q (one-hot) keeps the acceptance rule exact.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch

from ..trace.source import DraftSource
from .base import Proposal, one_hot_rows

TOKENS_FILE = "corpus.safetensors"
META_FILE = "corpus.json"
GRAM_LENGTHS = (6, 5, 4, 3)  # longest first: a longer match is right more often


@dataclass(frozen=True)
class CorpusMatch:
    """The context's longest indexed suffix found in the corpus: its length, where the continuation
    chosen by vote starts in the corpus, and how many tokens follow it in its document."""

    length: int
    start: int
    available: int


class TextCorpus:
    """Token sequences (documents) and the index of their n-grams (`GRAM_LENGTHS`)."""

    def __init__(self, documents: list[list[int]], meta: dict | None = None, path: str | None = None):
        self.path = path  # the folder it was loaded from (None: built in memory)
        self.tokens: list[int] = [t for doc in documents if doc for t in doc]
        self.ends: list[int] = []  # exclusive end of each document in `tokens`
        for doc in documents:
            if doc:
                self.ends.append((self.ends[-1] if self.ends else 0) + len(doc))
        self.meta = dict(meta or {})
        self.index = self._build_index()

    def __len__(self) -> int:
        return len(self.tokens)

    def _document_end(self, position: int) -> int:
        return self.ends[bisect_right(self.ends, position)]

    def _build_index(self) -> dict[tuple[int, ...], int]:
        """n-gram -> where the continuation after its most frequent next token starts; among equally
        frequent next tokens the one seen first wins, and its latest place is kept."""
        counts: Counter = Counter()
        latest: dict[tuple, int] = {}
        begin = 0
        for end in self.ends:
            for n in GRAM_LENGTHS:
                for i in range(begin, end - n):  # a continuation must exist inside the document
                    gram = tuple(self.tokens[i: i + n])
                    key = (gram, self.tokens[i + n])
                    counts[key] += 1
                    latest[key] = i + n
            begin = end
        best: dict[tuple, tuple[int, int]] = {}  # gram -> (count of its winning next token, continuation start)
        for (gram, nxt), count in counts.items():
            if gram not in best or count > best[gram][0]:
                best[gram] = (count, latest[(gram, nxt)])
        return {gram: start for gram, (_count, start) in best.items()}

    def find(self, sequence: list[int]) -> CorpusMatch | None:
        """The longest suffix of `sequence` (of `GRAM_LENGTHS`) that the corpus holds, with the
        continuation most often seen after it; None when none is held."""
        for n in GRAM_LENGTHS:
            start = self.index.get(tuple(sequence[-n:])) if len(sequence) >= n else None
            if start is not None:
                return CorpusMatch(n, start, self._document_end(start) - start)
        return None

    def continuation(self, match, n: int) -> list[int]:
        """Up to n tokens that followed `match` in the corpus, never past its document's end (a
        CorpusMatch, or a drafter's corpus DraftSource: anything with `start` and `available`)."""
        return self.tokens[match.start: match.start + min(n, match.available)]

    # --- files --------------------------------------------------------------------------------
    def save(self, directory: str | Path) -> None:
        from safetensors.torch import save_file

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        save_file({"tokens": torch.tensor(self.tokens, dtype=torch.int32),
                   "ends": torch.tensor(self.ends, dtype=torch.int64)}, str(directory / TOKENS_FILE))
        (directory / META_FILE).write_text(json.dumps(self.meta, indent=1) + "\n")

    @classmethod
    def load(cls, directory: str | Path) -> "TextCorpus":
        """Read a saved corpus; ValueError with the reason when the folder does not hold one."""
        from safetensors.torch import load_file

        directory = Path(directory).expanduser()
        if not (directory / TOKENS_FILE).is_file():
            raise ValueError(f"{directory} holds no {TOKENS_FILE}")
        data = load_file(str(directory / TOKENS_FILE))
        tokens, ends = data["tokens"].tolist(), data["ends"].tolist()
        if ends != sorted(ends) or (ends and ends[-1] != len(tokens)):
            raise ValueError(f"{directory / TOKENS_FILE} is malformed (document ends do not cover its tokens)")
        meta = json.loads((directory / META_FILE).read_text()) if (directory / META_FILE).is_file() else {}
        documents = [tokens[a:b] for a, b in zip([0] + ends[:-1], ends)]
        return cls(documents, meta, str(directory))


@lru_cache(maxsize=4)
def load_corpus(directory: str) -> TextCorpus:
    """A corpus loaded once per process (its index takes about a second to build)."""
    return TextCorpus.load(directory)


# --------------------------------------------------------------------------- as a draft source
def corpus_source(corpus, sequence: list[int]) -> DraftSource | None:
    """The corpus source of the context's longest suffix the corpus holds (a `TextCorpus`)."""
    found = corpus.find(sequence) if corpus is not None else None
    if found is None or found.available < 1:
        return None
    return DraftSource("corpus", found.length, found.start, found.available)


def corpus_proposal(corpus, source: DraftSource, n: int, width: int, device) -> Proposal:
    """Up to n tokens of what followed the match in the corpus; q is one-hot on each."""
    tokens = corpus.continuation(source, n)
    return Proposal(tokens, one_hot_rows(tokens, width, device), "corpus", source.match_length)
