"""Attention building blocks: scores, masked softmax, masks, multi-head attention, positions,
similarity, Gumbel sampling, input checks, sliding windows and decoding."""
