"""Prompt lookup (`decoding/drafters/lookup.py`): the suffix match and what it proposes."""

import torch

from decoding.drafters.lookup import PromptLookupDrafter, suffix_match
from decoding.rules.warp import SamplingConfig


def test_prompt_lookup_proposals():
    d = PromptLookupDrafter(vocab_width=20, device=torch.device("cpu"))
    assert d.find([1, 2, 3, 4, 1, 2], 3) == [3, 4, 1]
    assert d.find([1, 2, 3], 3) == []
    proposal = d.propose([5, 6, 7, 5, 6], 2, SamplingConfig(), torch.Generator())
    assert proposal.tokens == [7, 5]
    assert proposal.q_rows.sum(dim=-1).tolist() == [1.0, 1.0]


def test_suffix_match_finds_the_longest_most_recent_span():
    assert suffix_match([1, 2, 3, 4, 1, 2], 8) == (2, 2)
    assert suffix_match([5, 1, 2, 9, 1, 2, 7, 1, 2], 8) == (6, 2)  # equally long: the most recent
    assert suffix_match([7, 1, 2, 3, 9, 2, 3, 1, 2, 3], 8) == (4, 3)  # the longer one wins
    assert suffix_match([1, 2, 1, 2, 1, 2], 3) == (4, 3)  # capped at 3: the most recent capped match
    assert suffix_match([1, 2, 3], 8) is None and suffix_match([4], 8) is None
