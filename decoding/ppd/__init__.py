"""Parallel prompt decoding (PPD, Chen et al.; docs/papers.md): prompt tokens, sparse trees, the tree forward pass,
hardware-aware tree size and training. The decoding strategy is `decoding.strategies.ppd`.

    python -m decoding.ppd tune   ...   measure L(n), T(n); cache n* = argmax T(n)/L(n) for this device
    python -m decoding.ppd report ...   accepted length, tokens/s, speedup vs AR per tree size (README table)
    python -m decoding.ppd train  ...   train the prompt-token embeddings (KD, decayed KL; resumable)
"""

from .prompts import PromptTokens, load_prompt_tokens, untrained_prompt_tokens
from .tree import PPDTree, TreeBuffers, dynamic_trees, make_tree, tree_buffers

__all__ = ["PromptTokens", "load_prompt_tokens", "untrained_prompt_tokens", "PPDTree", "TreeBuffers",
           "dynamic_trees", "make_tree", "tree_buffers"]
