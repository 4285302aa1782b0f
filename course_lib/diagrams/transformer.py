"""Diagrams of lessons 08–11: scaled dot-product self-attention, heads as split and merge, the
Transformer's encoder and decoder blocks, and one decoding step with the key–value cache.
Symbols as in docs/notation.md: T positions, D = d_model, h heads of d_k = D / h."""

from __future__ import annotations

from course_lib.diagrams.canvas import Arrow, Box, Diagram, Dims
from course_lib.models.transformer import TransformerConfig


def self_attention_diagram(d_model: int, d_k: int, batch: int = 32, length: int = 10
                           ) -> Diagram:
    """One head of self-attention: X is projected to queries, keys and values, every query is
    scored against every key, and each output row is a weighted average of the values."""
    dims = Dims({"B": batch, "T": length, "D": d_model, "d_k": d_k})
    boxes = [Box("x", 0, 0, "$X$ (one vector per position)", "input", width=3.4),
             Box("wq", -3.2, 2.2, "$Q = X W^Q$", "layer"),
             Box("wk", 0, 2.2, "$K = X W^K$", "layer"),
             Box("wv", 3.2, 2.2, "$V = X W^V$", "layer"),
             Box("score", -1.6, 4.4, r"$Q K^\top / \sqrt{d_k}$", "attention", width=2.4),
             Box("softmax", -1.6, 6.6, "softmax over keys", "op", width=2.4),
             Box("mix", 1.6, 8.8, "$A V$", "op"),
             Box("out", 1.6, 11.0, "output", "state")]
    arrows = [Arrow("x", "wq", dims("B", "T", "D")), Arrow("x", "wk", dims("B", "T", "D")),
              Arrow("x", "wv", dims("B", "T", "D")),
              Arrow("wq", "score", dims("B", "T", "d_k"), text="Q"),
              Arrow("wk", "score", dims("B", "T", "d_k"), text="K"),
              Arrow("score", "softmax", dims("B", "T", "T"), text="scores"),
              Arrow("softmax", "mix", dims("B", "T", "T"), text="A"),
              Arrow("wv", "mix", dims("B", "T", "d_k"), text="V"),
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
    boxes = [Box("x", 0, 0, "$X$", "input"),
             Box("proj", 0, 2.2, "$X W^Q,\\ X W^K,\\ X W^V$", "layer", width=3.2),
             Box("split", 0, 4.4, "split_heads", "op", width=2.2),
             Box("attend", 0, 6.6, "attention in each head", "attention", width=3.2),
             Box("merge", 0, 8.8, "merge_heads", "op", width=2.2),
             Box("wo", 0, 11.0, "$W^O$", "layer"),
             Box("out", 0, 13.2, "output", "state")]
    arrows = [Arrow("x", "proj", dims("B", "T", "D")),
              Arrow("proj", "split", dims("B", "T", "D"), text="each of Q, K, V"),
              Arrow("split", "attend", dims("B", "h", "T", "d_k")),
              Arrow("attend", "merge", dims("B", "h", "T", "d_k"),
                    text=f"weights {dims('B', 'h', 'T', 'T')};"),
              Arrow("merge", "wo", dims("B", "T", "h·d_k")),
              Arrow("wo", "out", dims("B", "T", "D"))]
    return Diagram(f"{num_heads} heads as split and merge", boxes, arrows, dims,
                   caption="Head i reads columns i·d_k to (i+1)·d_k − 1 of each "
                           "projection; split and merge only reshape.")


def _block(prefix: str, x: float, y: float, stream: str, sublayers: list[tuple[str, str]],
           norm_first: bool, shape) -> tuple[list[Box], list[Arrow], str, float]:
    """One block: per sub-layer a LayerNorm, the sub-layer and the residual sum, in pre-norm or
    post-norm order, above the box ``stream`` at height ``y``. Returns the boxes, the arrows,
    the key of the block's output and the height reached."""
    boxes, arrows = [], []
    for i, (text, kind) in enumerate(sublayers):
        norm, layer, add = f"{prefix}{i}norm", f"{prefix}{i}layer", f"{prefix}{i}add"
        texts = {norm: ("LayerNorm", "op", 2.0), layer: (text, kind, 3.4), add: ("+", "op", 0.7)}
        order = [norm, layer, add] if norm_first else [layer, add, norm]
        previous = stream
        for key in order:
            y += 1.4
            boxes.append(Box(key, x, y, texts[key][0], texts[key][1], width=texts[key][2]))
            arrows.append(Arrow(previous, key, shape if previous == stream else None))
            previous = key
        arrows.append(Arrow(stream, add, None, text="residual", bend=-1.0))
        stream = previous
    return boxes, arrows, stream, y


def transformer_diagram(config: TransformerConfig, batch: int = 32, src_len: int = 20,
                        tgt_len: int = 18) -> Diagram:
    """The encoder block and the decoder block (each repeated N times), with the masks of the
    three attentions, the residual paths and the LayerNorms in ``config``'s order."""
    sizes = {"B": batch, "S": src_len, "T": tgt_len, "D": config.d_model, "d_ff": config.d_ff}
    if config.tgt_vocab_size:  # 0 while the data that decide it do not exist yet
        sizes["V"] = config.tgt_vocab_size
    dims = Dims(sizes)
    norm_first = config.norm_first
    boxes = [Box("src", 0, 0, "source tokens", "input", width=2.4),
             Box("src_embed", 0, 1.6, "embedding + positions", "layer", width=3.4),
             Box("tgt", 8, 0, "target tokens (shifted right)", "input", width=3.6),
             Box("tgt_embed", 8, 1.6, "embedding + positions", "layer", width=3.4)]
    arrows = [Arrow("src", "src_embed", dims("B", "S")), Arrow("tgt", "tgt_embed", dims("B", "T"))]
    ffn = f"feed-forward D → {config.d_ff} → D"
    enc_boxes, enc_arrows, memory, top = _block(
        "enc", 0, 1.6, "src_embed", [("self-attention (padding mask)", "attention"),
                                     (ffn, "layer")], norm_first, dims("B", "S", "D"))
    dec_boxes, dec_arrows, out, dec_top = _block(
        "dec", 8, 1.6, "tgt_embed", [("masked self-attention (causal)", "attention"),
                                     ("cross-attention (K, V: memory)", "attention"),
                                     (ffn, "layer")], norm_first, dims("B", "T", "D"))
    boxes += enc_boxes + dec_boxes
    arrows += enc_arrows + dec_arrows
    if norm_first:  # pre-norm stacks end with one more LayerNorm
        boxes += [Box("enc_final", 0, top + 1.4, "LayerNorm", "op", width=2.0),
                  Box("dec_final", 8, dec_top + 1.4, "LayerNorm", "op", width=2.0)]
        arrows += [Arrow(memory, "enc_final"), Arrow(out, "dec_final")]
        memory, out, top, dec_top = "enc_final", "dec_final", top + 1.4, dec_top + 1.4
    boxes += [Box("memory", 0, top + 1.6, f"memory (after {config.num_encoder_layers} blocks)",
                  "state", width=3.4),
              Box("logits", 8, dec_top + 1.6,
                  f"linear + softmax (after {config.num_decoder_layers} blocks)", "layer",
                  width=4.4)]
    arrows += [Arrow(memory, "memory", dims("B", "S", "D")),
               Arrow(out, "logits", dims("B", "T", "D")),
               Arrow("memory", "dec1layer", dims("B", "S", "D"), text="K, V")]
    order = "pre-norm" if norm_first else "post-norm"
    return Diagram(f"Transformer encoder and decoder blocks ({order})", boxes, arrows, dims,
                   caption="Masks: padding in every attention that reads the source; causal "
                           "and padding in the decoder's self-attention.")


def kv_cache_diagram(d_model: int, num_heads: int, step: int, batch: int = 32) -> Diagram:
    """Decoding step ``step`` (counting from 1) of one self-attention layer with a key–value
    cache: only the new position is projected; its key and value join those of the earlier
    steps, and its one query reads all of them."""
    if step < 1 or d_model % num_heads:
        raise ValueError(f"need step >= 1 and d_model divisible by num_heads, got step={step}, "
                         f"d_model={d_model}, num_heads={num_heads}")
    dims = Dims({"B": batch, "t": step, "D": d_model, "h": num_heads,
                 "d_k": d_model // num_heads})
    boxes = [Box("new", 0, 0, "the newest position only", "input", width=3.2),
             Box("q", -3.4, 2.2, "query", "layer"),
             Box("kv", 2.4, 2.2, "key, value", "layer"),
             Box("cache", 2.4, 4.6, "cache: keys and values of steps 1 … t", "state", width=4.6),
             Box("attend", -1.0, 6.8, "one query against t keys", "attention", width=3.4),
             Box("out", -1.0, 9.0, "output of step t", "state", width=2.6)]
    arrows = [Arrow("new", "q", dims("B", "1", "D")), Arrow("new", "kv", dims("B", "1", "D")),
              Arrow("kv", "cache", dims("B", "h", "1", "d_k"), text="append"),
              Arrow("q", "attend", dims("B", "h", "1", "d_k")),
              Arrow("cache", "attend", dims("B", "h", "t", "d_k")),
              Arrow("attend", "out", dims("B", "1", "D"),
                    text=f"weights {dims('B', 'h', '1', 't')};")]
    return Diagram(f"Decoding step t = {step} with a key–value cache", boxes, arrows, dims,
                   caption="Without the cache, step t would project all t positions again.")
