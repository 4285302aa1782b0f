"""Attention building blocks: scores, masked softmax, masks, multi-head attention, positions,
similarity, Gumbel sampling, sliding windows and decoding."""
