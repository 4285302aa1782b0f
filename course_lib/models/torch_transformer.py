"""The course's Transformer architecture built around ``torch.nn.Transformer``: the reference
that ``course bench`` times :class:`~course_lib.models.transformer.Transformer` against."""

from __future__ import annotations

import math
import warnings

import torch
from torch import nn

from course_lib.arguments import check_lengths, check_model_tokens
from course_lib.models.transformer import Transformer, TransformerConfig
from course_lib.nn.positions import SinusoidalPositions
from course_lib.tokens import PAD_ID


class TorchTransformer(nn.Module):
    """The architecture of :class:`~course_lib.models.transformer.Transformer` around
    ``torch.nn.Transformer``: the same scaled embeddings, sinusoidal positions, tied output
    layer and masks (source padding; causal target), so that only the layers differ.

    ``nn.Transformer`` always ends its stacks with a LayerNorm; ours does with pre-norm only,
    which is why the comparison uses pre-norm (then both have the same parameters).
    Shapes: ``src`` (B, S), ``src_lengths`` (B,), ``tgt_in`` (B, T) -> logits (B, T, V).
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        c = self.config = config
        self.src_embed = nn.Embedding(c.src_vocab_size, c.d_model, padding_idx=PAD_ID)
        self.tgt_embed = nn.Embedding(c.tgt_vocab_size, c.d_model, padding_idx=PAD_ID)
        self.src_positions = SinusoidalPositions(c.d_model, c.max_len)
        self.tgt_positions = SinusoidalPositions(c.d_model, c.max_len)
        self.dropout = nn.Dropout(c.dropout)
        with warnings.catch_warnings():  # "enable_nested_tensor is True, but ...": inference only
            warnings.simplefilter("ignore", UserWarning)
            self.layers = nn.Transformer(c.d_model, c.num_heads, c.num_encoder_layers,
                                         c.num_decoder_layers, c.d_ff, c.dropout,
                                         batch_first=True, norm_first=c.norm_first)
        self.out = nn.Linear(c.d_model, c.tgt_vocab_size)
        self.out.weight = self.tgt_embed.weight

    @classmethod
    def from_ours(cls, model: Transformer) -> TorchTransformer:
        """The same function as ``model`` (pre-norm): every weight copied across, W^Q, W^K, W^V
        stacked into PyTorch's ``in_proj_weight``."""
        if not model.config.norm_first:
            raise ValueError("only a pre-norm Transformer has nn.Transformer's final norms")
        theirs = cls(model.config).to(next(model.parameters()).device)
        ours, state = model.state_dict(), theirs.state_dict()
        # (our module, theirs) for every module with a weight and a bias copied as they are
        same = [("out", "out"), ("encoder_norm", "layers.encoder.norm"),
                ("decoder_norm", "layers.decoder.norm")]
        attentions = []  # (our MultiHeadAttention, their nn.MultiheadAttention)
        sublayers = {"encoder": ("attn_sublayer", "ffn_sublayer"),
                     "decoder": ("self_sublayer", "cross_sublayer", "ffn_sublayer")}
        for stack, names in sublayers.items():
            for i in range(len(getattr(model, f"{stack}_layers"))):
                mine, their = f"{stack}_layers.{i}", f"layers.{stack}.layers.{i}"
                same += [(f"{mine}.ffn.linear{j}", f"{their}.linear{j}") for j in (1, 2)]
                same += [(f"{mine}.{name}.norm", f"{their}.norm{j}")
                         for j, name in enumerate(names, start=1)]
                attentions.append((f"{mine}.self_attn", f"{their}.self_attn"))
                if stack == "decoder":
                    attentions.append((f"{mine}.cross_attn", f"{their}.multihead_attn"))
        for kind in ("weight", "bias"):
            for mine, their in same:
                state[f"{their}.{kind}"] = ours[f"{mine}.{kind}"]
            for mine, their in attentions:
                state[f"{their}.in_proj_{kind}"] = torch.cat(
                    [ours[f"{mine}.{n}_proj.{kind}"] for n in "qkv"])  # (3D, D) or (3D,)
                state[f"{their}.out_proj.{kind}"] = ours[f"{mine}.out_proj.{kind}"]
        for embedding in ("src_embed", "tgt_embed"):
            state[f"{embedding}.weight"] = ours[f"{embedding}.weight"]
        state["out.weight"] = ours["tgt_embed.weight"]  # tied in both
        theirs.load_state_dict(state)
        return theirs

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor,
                tgt_in: torch.Tensor) -> torch.Tensor:
        check_model_tokens("src", src, self.src_embed, "the model's source vocabulary",
                           shape=("B", "S"))
        check_model_tokens("tgt_in", tgt_in, self.tgt_embed, "the model's target vocabulary")
        src_lengths = check_lengths("src_lengths", src_lengths, src.shape[1], batch=src.shape[0],
                                    limit="the length S of src").to(src.device)
        scale = math.sqrt(self.config.d_model)
        x = self.dropout(self.src_positions(self.src_embed(src) * scale))  # (B, S, D)
        y = self.dropout(self.tgt_positions(self.tgt_embed(tgt_in) * scale))  # (B, T, D)
        positions = torch.arange(src.shape[1], device=src.device)  # (S,)
        padding = positions.unsqueeze(0) >= src_lengths.unsqueeze(1)  # (B, S), True = pad
        # PyTorch's convention is the opposite of ours: True = may NOT attend.
        steps = tgt_in.shape[1]
        future = torch.ones(steps, steps, dtype=torch.bool, device=src.device).triu(1)  # (T, T)
        hidden = self.layers(x, y, tgt_mask=future, src_key_padding_mask=padding,
                             memory_key_padding_mask=padding, tgt_is_causal=True)  # (B, T, D)
        return self.out(hidden)
