"""Diagrams of the recurrent models of lessons 02–05: the encoder–decoder and the ways it hands
the source over, one context for all steps against one per step, Bahdanau's decoder and
Luong's. Every shape on an arrow comes from the config, in the symbols of docs/notation.md."""

from __future__ import annotations

from course_lib.diagrams.canvas import Arrow, Box, Diagram, Dims
from course_lib.models.attention_seq2seq import AttentionSeq2SeqConfig
from course_lib.models.seq2seq import Seq2SeqConfig

# How the encoder's summary c reaches the decoder (lesson 02).
HANDOVERS = {
    "every_step": "c is part of the decoder's input at every step",
    "first_step": "c is part of the input at the first step only; zeros stand in for it after",
    "init": "c sets the decoder's first state s₀ and is not read again",
    "both": "c sets s₀ and is part of the input at every step",
}
STEP = 3.0  # horizontal distance between two unrolled time steps


def unrolled(prefix: str, x0: float, y: float, texts: list[str], kind: str,
             width: float = 1.8) -> list[Box]:
    """One box per time step, left to right, keyed ``prefix0``, ``prefix1``, ..."""
    return [Box(f"{prefix}{i}", x0 + STEP * i, y, text, kind, width=width)
            for i, text in enumerate(texts)]


def chain(prefix: str, n: int, shape, first: str | None = None) -> list[Arrow]:
    """Dashed arrows carrying a state from each step to the next (from ``first`` into step 0)."""
    starts = ([first] if first else []) + [f"{prefix}{i}" for i in range(n - 1)]
    ends = [f"{prefix}{i}" for i in range(0 if first else 1, n)]
    return [Arrow(a, b, shape, dashed=True) for a, b in zip(starts, ends, strict=True)]


def encoder_decoder_diagram(config: Seq2SeqConfig, handover: str = "both", batch: int = 32
                            ) -> Diagram:
    """The RNN encoder–decoder unrolled over three source and three target steps, with the
    context c handed to the decoder as ``handover`` says (one of :data:`HANDOVERS`)."""
    if handover not in HANDOVERS:
        raise ValueError(f"handover must be one of {list(HANDOVERS)}, got {handover!r}")
    dims = Dims({"B": batch, "d_e": config.embed_dim, "H": config.hidden_size,
                 "V": config.tgt_vocab_size})
    as_init = handover in ("init", "both")
    reads_c = [handover in ("every_step", "both") or (handover == "first_step" and t == 0)
               for t in range(3)]
    cell = config.cell.upper()
    boxes = [
        *unrolled("x", 0, 0, ["$x_1$", "$x_2$", "$x_S$"], "input"),
        *unrolled("h", 0, 2.4, [f"{cell} → $h_1$", f"{cell} → $h_2$", f"{cell} → $h_S$"], "layer"),
        Box("c", 9, 4.6, "context $c = h_S$", "state", width=2.2),
        Box("start", 9, 2.4, "$s_0 = \\tanh(W_{init}\\, c)$" if as_init else "$s_0 = 0$",
            "layer" if as_init else "op", width=2.0),
        *unrolled("y", 11.6, 0, ["<bos>", "$y_1$", "$y_2$"], "input", width=1.2),
        *unrolled("s", 12, 2.4, [f"{cell} → $s_1$", f"{cell} → $s_2$", f"{cell} → $s_3$"], "layer"),
        *unrolled("p", 12, 4.6, ["softmax → $y_1$", "softmax → $y_2$", "softmax → $y_3$"], "op"),
    ]
    if handover != "init":  # the decoder's input holds c, or zeros in its place
        boxes += unrolled("z", 12.8, 0, ["$c$" if r else "0" for r in reads_c], "state", width=0.7)
    state = dims("B", "H")
    arrows = [Arrow(f"x{i}", f"h{i}", dims("B"), text="ids") for i in range(3)]
    arrows += chain("h", 3, state) + [Arrow("h2", "c", state)]
    if as_init:
        arrows.append(Arrow("c", "start", state))
    arrows += chain("s", 3, state, first="start")
    for t in range(3):
        arrows.append(Arrow(f"y{t}", f"s{t}", dims("B", "d_e"), text="$E[y]$"))
        arrows.append(Arrow(f"s{t}", f"p{t}", dims("B", "V"), text="logits"))
        if handover != "init":
            arrows.append(Arrow(f"z{t}", f"s{t}", state))
    return Diagram(f"RNN encoder–decoder, hand-over '{handover}'", boxes, arrows, dims,
                   caption=HANDOVERS[handover] + ". Dashed: the state carried to the next step.")


def context_per_step_diagram(config: Seq2SeqConfig, batch: int = 32) -> Diagram:
    """The same unrolled model with the one context c replaced by a context per output step:
    every c_t is built from all the encoder states h_1 … h_S (lesson 03's way out of the
    bottleneck; lessons 04 and 05 say how the weights are chosen)."""
    single = encoder_decoder_diagram(config, "every_step", batch)
    boxes = [b for b in single.boxes if b.key != "c" and b.key[0] not in "yz"]
    for t in range(3):  # c_t left of y_{t-1}, so the lines from the encoder reach it first
        word = single.by_key[f"y{t}"]
        boxes += [Box(f"z{t}", word.x, 0, f"$c_{t + 1}$", "attention", width=0.9),
                  Box(f"y{t}", word.x + 1.2, 0, word.text, "input", width=word.width)]
    arrows = [a for a in single.arrows if "c" not in (a.start, a.end)]
    arrows += [Arrow(f"h{j}", f"z{t}", None) for t in range(3) for j in range(3)]
    return Diagram("A context per output step", boxes, arrows, single.dims,
                   caption="Each step's context is built from every encoder state, not only "
                           "the last.")


def _source_side(dims: Dims, encoder: str) -> tuple[list[Box], list[Arrow]]:
    """Source tokens, the bidirectional encoder and its annotations, in the left column."""
    boxes = [Box("x", 0, 0, "$x_1 \\ldots x_S$", "input"),
             Box("enc", 0, 2.2, encoder, "layer", width=2.2),
             Box("h", 0, 4.4, "annotations $h_1 \\ldots h_S$", "state", width=2.4)]
    arrows = [Arrow("x", "enc", dims("B", "S"), text="ids"),
              Arrow("enc", "h", dims("B", "S", "H"))]
    return boxes, arrows


def _attention_row(dims: Dims, score_text: str, query: str) -> tuple[list[Box], list[Arrow]]:
    """score → softmax → context at height 4.4, reading the annotations and ``query``."""
    boxes = [Box("score", 5.0, 4.4, score_text, "attention", width=3.0),
             Box("softmax", 9.4, 4.4, "softmax over $j$", "op"),
             Box("context", 12.8, 4.4, "$c_t = \\Sigma_j\\, a_{tj} h_j$", "op", width=2.2)]
    arrows = [Arrow("h", "score", dims("B", "S", "H")), Arrow(query, "score", dims("B", "H")),
              Arrow("score", "softmax", dims("B", "S"), text="$e_t$"),
              Arrow("softmax", "context", dims("B", "S"), text="$a_t$"),
              Arrow("h", "context", dims("B", "S", "H"), bend=-0.2)]
    return boxes, arrows


def bahdanau_diagram(config: AttentionSeq2SeqConfig, batch: int = 32, src_len: int = 20
                     ) -> Diagram:
    """One decoder step of Bahdanau et al.: the previous state s_{t−1} scores every annotation
    with the additive score, the weights a_t average the annotations into c_t, and the
    recurrent cell reads [E[y_{t−1}]; c_t] to give s_t."""
    dims = Dims({"B": batch, "S": src_len, "d_e": config.embed_dim, "H": config.hidden_size,
                 "V": config.tgt_vocab_size})
    cell = config.cell.upper()
    boxes, arrows = _source_side(dims, f"bidirectional {cell}")
    more_boxes, more_arrows = _attention_row(dims, "$e_{tj} = v^\\top \\tanh(W s_{t-1} + U h_j)$",
                                             "s_prev")
    boxes += more_boxes + [
        Box("s_prev", 5.0, 7.0, "$s_{t-1}$", "state", width=1.4),
        Box("y", 16.4, 2.2, "$y_{t-1}$", "input", width=1.4),
        Box("cell", 16.4, 4.4, f"{cell} step", "layer"),
        Box("s", 16.4, 7.0, "$s_t$", "state", width=1.4),
        Box("out", 20.6, 4.4, "$W_{out}\\,[s_t; c_t; E[y_{t-1}]]$", "layer", width=2.6),
        Box("yt", 20.6, 7.0, "softmax → $y_t$", "op"),
    ]
    arrows += more_arrows + [
        Arrow("context", "cell", dims("B", "H"), text="$c_t$"),
        Arrow("y", "cell", dims("B", "d_e"), text="$E[y]$"),
        Arrow("s_prev", "cell", dims("B", "H"), bend=-0.2),
        Arrow("cell", "s", dims("B", "H")),
        Arrow("s", "out", dims("B", "H")),
        Arrow("out", "yt", dims("B", "V"), text="logits"),
        Arrow("s", "s_prev", dims("B", "H"), text="next step", dashed=True, bend=0.15),
    ]
    return Diagram("Bahdanau attention: one decoder step", boxes, arrows, dims,
                   caption="The query is the previous state; the new state reads the context.")


def luong_diagram(config: AttentionSeq2SeqConfig, batch: int = 32, src_len: int = 20
                  ) -> Diagram:
    """One decoder step of Luong et al.: the recurrent cell runs first, its new state s_t is the
    query (global, or local-p with a window around a predicted position p_t), and the attentional
    state s̃_t = tanh(W_c [c_t; s_t]) gives the word and, with input feeding, goes into the next
    step's input."""
    dims = Dims({"B": batch, "S": src_len, "d_e": config.embed_dim, "H": config.hidden_size,
                 "V": config.tgt_vocab_size})
    cell = config.cell.upper()
    scores = {"dot": r"$s_t^\top h_j$", "general": r"$s_t^\top W_g h_j$",
              "concat": r"$v^\top \tanh(W_a [s_t; h_j])$"}
    score = scores[config.score] + (r" / $\sqrt{d_k}$" if config.scaled else "")
    boxes, arrows = _source_side(dims, f"bidirectional {cell}")
    more_boxes, more_arrows = _attention_row(dims, f"score {score}", "s")
    boxes += more_boxes + [
        Box("y", 0.0, 9.6, "$y_{t-1}$", "input", width=1.4),
        Box("cell", 3.4, 9.6, f"{cell} step", "layer"),
        Box("s", 7.2, 9.6, "$s_t$", "state", width=1.4),
        Box("tilde", 16.4, 4.4, r"$\tilde s_t = \tanh(W_c [c_t; s_t])$", "layer", width=3.4),
        Box("yt", 16.4, 7.0, r"softmax$(W_{out} \tilde s_t)$ → $y_t$", "op", width=3.0),
    ]
    arrows += more_arrows + [
        Arrow("y", "cell", dims("B", "d_e"), text="$E[y]$"),
        Arrow("cell", "s", dims("B", "H")),
        Arrow("context", "tilde", dims("B", "H"), text="$c_t$"),
        Arrow("s", "tilde", dims("B", "H"), bend=-0.2),
        Arrow("tilde", "yt", dims("B", "H")),
    ]
    if config.input_feeding:  # the previous step's attentional state joins the input
        boxes.append(Box("fed", 3.4, 11.8, r"$\tilde s_{t-1}$ from the previous step", "state",
                         width=3.6))
        arrows.append(Arrow("fed", "cell", dims("B", "H"), text="input feeding", dashed=True))
    if config.local == "p":
        window = f"$p_t$, window $[p_t - r, p_t + r]$, $r = {config.window}$"
        boxes.append(Box("window", 9.4, 7.0, window, "attention", width=3.2))
        arrows += [Arrow("s", "window", dims("B", "H")),
                   Arrow("window", "softmax", dims("B", "S"), text="Gaussian × mask")]
    kind = {None: "global", "p": "local-p", "m": "local-m"}[config.local]
    feeding = "with" if config.input_feeding else "without"
    return Diagram(f"Luong attention ({kind}, {config.score} score, {feeding} input feeding)",
                   boxes, arrows, dims,
                   caption="The query is the current state: the cell runs first, then attends.")
