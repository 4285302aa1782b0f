"""Diagrams of lessons 08–11: scaled dot-product self-attention, heads as split and merge, the
Transformer's encoder and decoder blocks, and one decoding step with the key–value cache.
Symbols as in docs/notation.md: T positions, D = d_model, h heads of d_k = D / h."""

from __future__ import annotations

from course_lib.diagrams.canvas import Arrow, Box, Diagram, Dims
from course_lib.diagrams.recurrent import ROW
from course_lib.models.transformer import TransformerConfig

# A sub-layer with its residual path and LayerNorm, f being the sub-layer, in each order.
SUBLAYER = {True: r"$x + f(\mathrm{LN}(x))$", False: r"$\mathrm{LN}(x + f(x))$"}


def self_attention_diagram(d_model: int, d_k: int, batch: int = 32, length: int = 10
                           ) -> Diagram:
    """One head of self-attention: X is projected to queries, keys and values, every query is
    scored against every key, and each output row is a weighted average of the values."""
    dims = Dims({"B": batch, "T": length, "D": d_model, "d_k": d_k})
    boxes = [Box("x", 16, 0, "$X$ (one vector per position)", "input"),
             Box("wq", 3, ROW, "$Q = X W^Q$", "layer"),
             Box("wk", 14, ROW, "$K = X W^K$", "layer"),
             Box("wv", 29, ROW, "$V = X W^V$", "layer"),
             Box("score", 6, 2 * ROW, r"$Q K^\top / \sqrt{d_k}$", "attention"),
             Box("softmax", 17.5, 2 * ROW, "$A$ = softmax over keys", "op"),
             Box("mix", 29, 2 * ROW, "$A V$", "op"),
             Box("out", 29, 3 * ROW, "output", "state")]
    arrows = [Arrow("x", "wq", dims("B", "T", "D")), Arrow("x", "wk", dims("B", "T", "D")),
              Arrow("x", "wv", dims("B", "T", "D")),
              Arrow("wq", "score", dims("B", "T", "d_k")),
              Arrow("wk", "score", dims("B", "T", "d_k")),
              Arrow("score", "softmax", dims("B", "T", "T")),
              Arrow("softmax", "mix", dims("B", "T", "T")),
              Arrow("wv", "mix", dims("B", "T", "d_k")),
              Arrow("mix", "out", dims("B", "T", "d_k"))]
    return Diagram("Scaled dot-product self-attention (one head)", boxes, arrows, dims,
                   caption="Row t of A says how much position t reads from every position.")


def heads_diagram(d_model: int, num_heads: int, batch: int = 32, length: int = 10) -> Diagram:
    """Multi-head attention as reshapes: one D × D projection per role, split into h heads of
    d_k = D / h, attention in every head at once, heads merged back and mixed by W^O."""
    if d_model % num_heads:
        raise ValueError(f"d_model must be divisible by num_heads, got {d_model} and "
                         f"{num_heads}")
    dims = Dims({"B": batch, "T": length, "D": d_model, "h": num_heads,
                 "d_k": d_model // num_heads})
    weights = dims("B", "h", "T", "T")
    boxes = [Box("x", 3, 0, "$X$", "input"),
             Box("proj", 14, 0, "each of $X W^Q,\\ X W^K,\\ X W^V$", "layer"),
             Box("split", 29, 0, "split_heads", "op"),
             Box("attend", 29, ROW, f"attention in each head,\nweights {weights}", "attention"),
             Box("merge", 14, ROW, "merge_heads", "op"),
             Box("wo", 3, ROW, "$W^O$", "layer"),
             Box("out", 3, 2 * ROW, "output", "state")]
    arrows = [Arrow("x", "proj", dims("B", "T", "D")),
              Arrow("proj", "split", dims("B", "T", "D")),
              Arrow("split", "attend", dims("B", "h", "T", "d_k")),
              Arrow("attend", "merge", dims("B", "h", "T", "d_k")),
              Arrow("merge", "wo", dims("B", "T", "h·d_k")),
              Arrow("wo", "out", dims("B", "T", "D"))]
    return Diagram(f"{num_heads} heads as split and merge", boxes, arrows, dims,
                   caption="Head i reads columns i·d_k to (i+1)·d_k − 1 of each "
                           "projection; split and merge only reshape.")


TRANSFORMER_ROW = 3.9  # ems between two sub-layers (their arrows carry no names)


def _stack(prefix: str, x: float, sublayers: list[tuple[str, str]], norm_first: bool,
           stream: str, shape) -> tuple[list[Box], list[Arrow], str]:
    """One block's sub-layers above the box ``stream`` (whose output has ``shape``), each with
    its residual path and LayerNorm in ``norm_first``'s order. Returns the boxes, the arrows
    and the key of the last sub-layer."""
    boxes, arrows = [], []
    for i, (text, kind) in enumerate(sublayers):
        key = f"{prefix}{i}"
        boxes.append(Box(key, x, 4.7 + i * TRANSFORMER_ROW, f"{text}\n{SUBLAYER[norm_first]}",
                         kind, shows_shape=False))
        arrows.append(Arrow(stream, key, shape if i == 0 else None))
        stream = key
    return boxes, arrows, stream


def transformer_diagram(config: TransformerConfig, batch: int = 32, src_len: int = 20,
                        tgt_len: int = 18) -> Diagram:
    """The encoder block and the decoder block (each repeated N times): every sub-layer with
    its residual path and LayerNorm in ``config``'s order (pre-norm: x + f(LN(x)); post-norm:
    LN(x + f(x))), and the masks of the three attentions."""
    sizes = {"B": batch, "S": src_len, "T": tgt_len, "D": config.d_model, "d_ff": config.d_ff}
    if config.tgt_vocab_size:  # 0 while the data that decide it do not exist yet
        sizes["V"] = config.tgt_vocab_size
    dims = Dims(sizes)
    norm_first = config.norm_first
    ffn = f"feed-forward D → {config.d_ff} → D"
    enc_boxes, enc_arrows, memory = _stack(
        "enc", 8.5, [("self-attention, padding mask", "attention"), (ffn, "layer")],
        norm_first, "src_embed", dims("B", "S", "D"))
    dec_boxes, dec_arrows, out = _stack(
        "dec", 30, [("masked self-attention (causal)", "attention"),
                    ("cross-attention (K, V: memory)", "attention"), (ffn, "layer")],
        norm_first, "tgt_embed", dims("B", "T", "D"))
    final = "final LayerNorm, " if norm_first else ""  # pre-norm stacks end with one more
    boxes = [Box("src_embed", 8.5, 0, "source tokens → embedding\n+ positions", "layer",
                 shows_shape=False),
             Box("tgt_embed", 30, 0, "target tokens (shifted right)\n→ embedding + positions",
                 "layer", shows_shape=False), *enc_boxes, *dec_boxes,
             Box("memory", 8.5, 4.7 + TRANSFORMER_ROW + 4.1, f"{final}memory", "state"),
             Box("logits", 30, 4.7 + 2 * TRANSFORMER_ROW + 3.5, f"{final}linear + softmax",
                 "layer")]
    arrows = enc_arrows + dec_arrows + [
        Arrow(memory, "memory"), Arrow(out, "logits"),
        Arrow("memory", "dec1", dims("B", "S", "D"), text="K, V")]
    order = "pre-norm" if norm_first else "post-norm"
    blocks = f"{config.num_encoder_layers} encoder and {config.num_decoder_layers} decoder"
    return Diagram(f"Transformer, {blocks} blocks ({order})", boxes, arrows, dims,
                   caption="f: the sub-layer; LN: LayerNorm. Padding masks wherever the source "
                           "is read.")


def kv_cache_diagram(d_model: int, num_heads: int, step: int, batch: int = 32) -> Diagram:
    """Decoding step ``step`` (counting from 1) of one self-attention layer with a key–value
    cache: only the new position is projected; its key and value join those of the earlier
    steps, and its one query reads all of them."""
    if step < 1 or d_model % num_heads:
        raise ValueError(f"need step >= 1 and d_model divisible by num_heads, got step={step}, "
                         f"d_model={d_model}, num_heads={num_heads}")
    dims = Dims({"B": batch, "t": step, "D": d_model, "h": num_heads,
                 "d_k": d_model // num_heads})
    weights = dims("B", "h", "1", "t")
    boxes = [Box("new", 12, 0, "the newest position only", "input"),
             Box("q", 4, ROW, "query", "layer"),
             Box("kv", 19, ROW, "key, value", "layer"),
             Box("cache", 19, 2 * ROW + 0.8, "cache: keys and values\nof steps 1 … t", "state"),
             Box("attend", 4, 2 * ROW + 0.8, f"one query against t keys,\nweights {weights}",
                 "attention"),
             Box("out", 4, 3 * ROW + 1.2, "output of step t", "state")]
    arrows = [Arrow("new", "q", dims("B", "1", "D")), Arrow("new", "kv", dims("B", "1", "D")),
              Arrow("kv", "cache", dims("B", "h", "1", "d_k"), text="append"),
              Arrow("q", "attend", dims("B", "h", "1", "d_k")),
              Arrow("cache", "attend", dims("B", "h", "t", "d_k")),
              Arrow("attend", "out", dims("B", "1", "D"))]
    return Diagram(f"Decoding step t = {step} with a key–value cache", boxes, arrows, dims,
                   caption="Without the cache, step t would project all t positions again.")
