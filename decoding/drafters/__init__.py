"""Layer 3, the drafters: what proposes the draft tokens, and how many to propose (the next commit splits
hybrid.py, which is still decoding/drafters.py whole, by drafter)."""
