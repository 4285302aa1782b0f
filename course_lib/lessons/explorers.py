"""Attention explorers of trained Transformers (lessons 09 and 10): every kind of attention,
layer and head of one sentence, with the decoder's causal mask shown as masked."""

from __future__ import annotations

from collections.abc import Sequence

from course_lib.models.transformer import AttentionMaps
from course_lib.nn.self_attention import causal_mask
from course_lib.widgets.explorer import AttentionExplorer, explorer_from_views


def transformer_views(maps: AttentionMaps, example: int, source: Sequence[str],
                      reads: Sequence[str], predicts: Sequence[str], *,
                      mean_of_heads: bool = True) -> list[dict]:
    """One view per (kind, layer, head) of sentence ``example`` of ``maps`` (and the mean of the
    heads), cut to its tokens: ``source`` (the encoder's keys and queries), ``reads`` (the
    decoder's input tokens, its self-attention keys) and ``predicts`` (the tokens each decoder
    position predicts, its queries). Decoder self-attention carries the causal mask."""
    kinds = {"cross": (maps.cross, predicts, source, False),
             "decoder self": (maps.decoder, predicts, reads, True),
             "encoder self": (maps.encoder, source, source, False)}
    views = []
    for kind, (layers, queries, keys, causal) in kinds.items():
        n_queries, n_keys = len(queries), len(keys)
        masks = ~causal_mask(n_queries, n_keys) if causal else None  # (Tq, Tk), True = masked
        for layer, weights in enumerate(layers):
            heads = weights[example, :, :n_queries, :n_keys].float().cpu()  # (h, Tq, Tk)
            named = {str(h): heads[h] for h in range(heads.shape[0])}
            if mean_of_heads:
                named["mean"] = heads.mean(dim=0)  # (Tq, Tk): rows still sum to 1
            for head, matrix in named.items():
                views.append({"labels": {"kind": kind, "layer": layer + 1, "head": head},
                              "queries": list(queries), "keys": list(keys),
                              "weights": matrix, "masks": masks})
    return views


def transformer_explorer(maps: AttentionMaps, example: int, source: Sequence[str],
                         reads: Sequence[str], predicts: Sequence[str],
                         title: str) -> AttentionExplorer:
    """The explorer of ``transformer_views``: kind, layer and head chosen on the widget."""
    return explorer_from_views(
        transformer_views(maps, example, source, reads, predicts), title=title,
        query_label="the position asking", key_label="the positions it reads")
