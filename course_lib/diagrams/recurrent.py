"""Diagrams of the recurrent models of lessons 02–05: the encoder–decoder and the ways it hands
the source over, one context for all steps against one per step, Bahdanau's decoder and
Luong's. Every shape on an arrow comes from the config, in the symbols of docs/notation.md."""

from __future__ import annotations

from dataclasses import replace

from course_lib.arguments import check_choice
from course_lib.diagrams.canvas import Arrow, Box, Diagram, Dims
from course_lib.models.attention_seq2seq import AttentionSeq2SeqConfig
from course_lib.models.seq2seq import Seq2SeqConfig

# How the encoder's summary c reaches the decoder (lesson 02).
HANDOVERS = {
    "every_step": "c is part of the decoder's input at every step",
    "first_step": "c is part of the input at the first step only; zeros stand in for it after",
    "copy": "c itself is the decoder's first state s₀ and is not read again",
    "init": "c sets s₀ through a layer, tanh(W_init c), and is not read again",
    "both": "c sets s₀ through a layer and is part of the input at every step (Cho et al., 2014)",
}
STEP = 8.0  # ems between two unrolled decoder steps
ROW = 4.4  # ems between two rows of boxes
UNROLLED_ROW = 4.0  # the same in the unrolled diagrams, whose vertical arrows have no names


def unrolled(prefix: str, x0: float, y: float, texts: list[str], kind: str,
             step: float = STEP) -> list[Box]:
    """One box per time step, left to right, keyed ``prefix0``, ``prefix1``, ..."""
    return [Box(f"{prefix}{i}", x0 + step * i, y, text, kind) for i, text in enumerate(texts)]


def chain(prefix: str, n: int, shape, first: str | None = None) -> list[Arrow]:
    """Dashed arrows carrying a state from each step to the next (from ``first`` into step 0)."""
    starts = ([first] if first else []) + [f"{prefix}{i}" for i in range(n - 1)]
    ends = [f"{prefix}{i}" for i in range(0 if first else 1, n)]
    return [Arrow(a, b, shape, dashed=True) for a, b in zip(starts, ends, strict=True)]


def encoder_decoder_diagram(config: Seq2SeqConfig, handover: str = "both", batch: int = 32
                            ) -> Diagram:
    """The RNN encoder–decoder unrolled over three source and three target steps, with the
    context c handed to the decoder as ``handover`` says (one of :data:`HANDOVERS`): the
    encoder along the bottom, the decoder above and to its right."""
    check_choice("handover", handover, HANDOVERS)
    dims = Dims({"B": batch, "d_e": config.embed_dim, "H": config.hidden_size,
                 "V": config.tgt_vocab_size})
    as_init, copies = handover in ("init", "both"), handover == "copy"
    reads_c = [handover in ("every_step", "both") or (handover == "first_step" and t == 0)
               for t in range(3)]
    row = UNROLLED_ROW
    boxes = [
        *unrolled("x", 0, 0, ["$x_1$", "$x_2$", "$x_S$"], "input", step=5.5),
        *unrolled("h", 0, row, ["$h_1$", "$h_2$", "$h_S$"], "layer", step=5.5),
        Box("c", 11, 2 * row, "$c = h_S$", "state"),
        Box("start", 8.5, 3 * row, "$s_0 = \\tanh(W_{init}\\, c)$" if as_init
            else "$s_0 = c$" if copies else "$s_0 = 0$", "layer" if as_init else "op"),
        *unrolled("y", 16.4, row, ["E[<bos>]", "$E[y_1]$", "$E[y_2]$"], "input"),
        *[replace(box, shows_shape=False) for box in
          unrolled("s", 18, 3 * row, ["$s_1$", "$s_2$", "$s_3$"], "layer")],
        *unrolled("p", 18, 4 * row, ["softmax → $y_1$", "softmax → $y_2$",
                                     "softmax → $y_3$"], "op"),
    ]
    if handover not in ("init", "copy"):  # the decoder's input holds c, or zeros in its place
        boxes += unrolled("z", 19.9, 2 * row, ["$c$" if r else "0" for r in reads_c], "state")
    state = dims("B", "H")
    arrows = [Arrow(f"x{i}", f"h{i}", dims("B")) for i in range(3)]
    arrows += chain("h", 3, state) + [Arrow("h2", "c", state)]
    if as_init or copies:
        arrows.append(Arrow("c", "start", state))
    arrows += chain("s", 3, state, first="start")
    for t in range(3):
        arrows.append(Arrow(f"y{t}", f"s{t}", dims("B", "d_e")))
        arrows.append(Arrow(f"s{t}", f"p{t}", dims("B", "V")))
        if handover not in ("init", "copy"):
            arrows.append(Arrow(f"z{t}", f"s{t}", state))
    cell = config.cell.upper()
    return Diagram(f"{cell} encoder–decoder, hand-over '{handover}'", boxes, arrows, dims,
                   caption=HANDOVERS[handover] + ".")


def context_per_step_diagram(config: Seq2SeqConfig, batch: int = 32) -> Diagram:
    """The same unrolled model with the one context c replaced by a context per output step:
    every c_t is built from all the encoder states h_1 … h_S, weighted by how well each fits
    the decoder's previous state s_{t−1}, and c_t then feeds s_t, the step that emits y_t
    (lesson 03's way out of the bottleneck, in the indexing of lesson 04; lessons 04 and 05 say
    how the weights are chosen). The decoder starts, as in the hand-over 'both', from
    s_0 = tanh(W_init h_S)."""
    single, row = encoder_decoder_diagram(config, "both", batch), UNROLLED_ROW
    boxes = [b for b in single.boxes if b.key not in ("c", "start") and b.key[0] not in "yz"]
    boxes.append(replace(single.by_key["start"], text="$s_0 = \\tanh(W_{init}\\, h_S)$"))
    for t in range(3):  # c_t left of the word, so the lines from the encoder reach it first
        step = single.by_key[f"s{t}"].x
        boxes += [Box(f"z{t}", step - 1.6, 2 * row, f"$c_{t + 1}$", "attention"),
                  Box(f"y{t}", step + 1.6, row, single.by_key[f"y{t}"].text, "input")]
    state = single.dims("B", "H")
    arrows = [a for a in single.arrows if "c" not in (a.start, a.end)]
    arrows += [Arrow("h2", "start", state)]
    arrows += [Arrow(h, f"z{t}", state) for t in range(3) for h in ("h0", "h1", "h2")]
    # the query: the state before step t decides which encoder states c_t reads (its shape,
    # (B, H), is printed on the dashed arrow beside it)
    arrows += [Arrow(query, f"z{t}") for t, query in enumerate(("start", "s0", "s1"))]
    return Diagram("A context per output step", boxes, arrows, single.dims,
                   caption="Each step's context is built from every encoder state, weighted by "
                           "the decoder's previous state.")


def _source_side(dims: Dims, encoder: str) -> tuple[list[Box], list[Arrow]]:
    """Source tokens, the bidirectional encoder and its annotations, along the bottom."""
    boxes = [Box("x", 2.5, 0, "$x_1 \\ldots x_S$", "input"),
             Box("enc", 10.5, 0, encoder, "layer"),
             Box("h", 21, 0, "annotations $h_j$", "state")]
    arrows = [Arrow("x", "enc", dims("B", "S")), Arrow("enc", "h", dims("B", "S", "H"))]
    return boxes, arrows


def _attention_row(dims: Dims, score_text: str, query: str) -> tuple[list[Box], list[Arrow]]:
    """score → softmax → context in the row above the annotations, reading the annotations
    and ``query``."""
    boxes = [Box("score", 8, ROW, score_text, "attention"),
             Box("softmax", 20.5, ROW, "softmax over $j$", "op"),
             Box("context", 29.5, ROW, "$c_t = \\Sigma_j\\, a_{tj} h_j$", "op")]
    arrows = [Arrow("h", "score", dims("B", "S", "H")), Arrow(query, "score", dims("B", "H")),
              Arrow("score", "softmax", dims("B", "S")),
              Arrow("softmax", "context", dims("B", "S")),
              Arrow("h", "context", dims("B", "S", "H"))]
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
    more_boxes, more_arrows = _attention_row(
        dims, "$e_{tj} = v^\\top \\tanh(W s_{t-1} + U h_j)$", "s_prev")
    boxes += more_boxes + [
        Box("s_prev", 8, 2 * ROW, "$s_{t-1}$", "state"),
        Box("cell", 29.5, 2 * ROW, f"{cell} step", "layer"),
        Box("y", 36, 2 * ROW, "$E[y_{t-1}]$", "input"),
        Box("s", 29.5, 3 * ROW, "$s_t$", "state"),
        Box("out", 18.5, 3 * ROW, "$W_{out}\\,[s_t; c_t; E[y_{t-1}]]$", "layer"),
        Box("yt", 5.5, 3 * ROW, "softmax → $y_t$", "op"),
    ]
    arrows += more_arrows + [
        Arrow("context", "cell", dims("B", "H")),
        Arrow("y", "cell", dims("B", "d_e")),
        Arrow("s_prev", "cell", dims("B", "H")),
        Arrow("cell", "s", dims("B", "H")),
        Arrow("s", "out", dims("B", "H")),
        Arrow("out", "yt", dims("B", "V")),
        Arrow("s", "s_prev", dims("B", "H"), text="next step", dashed=True, bend=-0.1),
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
        Box("s", 8, 2 * ROW, "$s_t$", "state"),
        Box("tilde", 32.5, 2 * ROW, r"$\tilde s_t = \tanh(W_c [c_t; s_t])$", "layer"),
        Box("cell", 8, 3 * ROW, f"{cell} step", "layer"),
        Box("y", 15, 3 * ROW, "$E[y_{t-1}]$", "input"),
        Box("yt", 32.5, 3 * ROW, r"softmax$(W_{out} \tilde s_t)$ → $y_t$", "op"),
    ]
    arrows += more_arrows + [
        Arrow("y", "cell", dims("B", "d_e")),
        Arrow("cell", "s", dims("B", "H")),
        Arrow("context", "tilde", dims("B", "H")),
        Arrow("s", "tilde", dims("B", "H"), via=((12, 2.5 * ROW), (25, 2.5 * ROW))),
        Arrow("tilde", "yt", dims("B", "H")),
    ]
    if config.input_feeding:  # the previous step's attentional state joins the input
        boxes.append(Box("fed", 1.5, 3 * ROW, r"fed $\tilde s_{t-1}$", "state"))
        arrows.append(Arrow("fed", "cell", dims("B", "H"), dashed=True))
    if config.local == "p":
        boxes.append(Box("window", 20, 2 * ROW, f"Gaussian window $p_t \\pm {config.window}$",
                         "attention"))
        arrows += [Arrow("s", "window", dims("B", "H")),
                   Arrow("window", "softmax", dims("B", "S"))]
    kind = {None: "global", "p": "local-p", "m": "local-m"}[config.local]
    feeding = "with" if config.input_feeding else "without"
    return Diagram(f"Luong attention ({kind}, {config.score} score, {feeding} input feeding)",
                   boxes, arrows, dims,
                   caption="The query is the current state: the cell runs first, then attends.")
