"""The architecture diagrams: their shapes are the shapes the models return, every hand-over mode
draws what it says, bad input is refused with a clear message, and every diagram a lesson draws
reads at least at the body text's size in the lab, on the site and on a slide, with no word over
another."""

import itertools

import matplotlib.pyplot as plt
import pytest
import torch

from course_lib.diagrams import draw
from course_lib.diagrams.canvas import Arrow, Box, Diagram, Dims
from course_lib.diagrams.captioner import hard_vs_soft_diagram, show_attend_tell_diagram
from course_lib.diagrams.display import (
    DISPLAYS,
    SLIDES,
    natural_size_px,
    shown_text_px,
    text_problems,
)
from course_lib.diagrams.drawing import FONT_PT
from course_lib.diagrams.recurrent import (
    HANDOVERS,
    bahdanau_diagram,
    context_per_step_diagram,
    encoder_decoder_diagram,
    luong_diagram,
)
from course_lib.diagrams.transformer import (
    heads_diagram,
    kv_cache_diagram,
    self_attention_diagram,
    transformer_diagram,
)
from course_lib.models.attention_seq2seq import AttentionSeq2Seq, AttentionSeq2SeqConfig
from course_lib.models.captioner import CaptionerConfig, ShowAttendTell
from course_lib.models.pointer import PointerConfig, PointerNet
from course_lib.models.seq2seq import CONTEXT_MODES, Seq2Seq, Seq2SeqConfig
from course_lib.models.transformer import Transformer, TransformerConfig
from course_lib.nn.self_attention import KVCache, MultiHeadAttention, scaled_dot_product_attention
from tests.diagram_gallery import lesson_diagrams, wide_diagrams

B, S, T = 3, 7, 5


def test_dims_read_sums_products_and_factors():
    dims = Dims({"B": 2, "H": 8, "h": 4, "d_k": 16})
    assert dims("B", "2H", "h·d_k", "H+h", "3").sizes == (2, 16, 64, 12, 3)
    assert str(dims("B", "2H")) == "(B, 2H)"
    with pytest.raises(ValueError, match="dimension 'E' has no size; known: B, H, d_k, h"):
        dims("E")
    with pytest.raises(ValueError, match="cannot read the dimension '2-H'"):
        dims("2-H")


def test_a_diagram_refuses_duplicate_boxes_and_dangling_arrows():
    box = Box("a", 0, 0, "a")
    with pytest.raises(ValueError, match="two boxes have the key 'a'"):
        Diagram("t", [box, box], [], Dims({}))
    with pytest.raises(ValueError, match=r"arrow 'a' -> 'b' names no box \['b'\]"):
        Diagram("t", [box], [Arrow("a", "b")], Dims({}))
    with pytest.raises(ValueError, match="kind must be one of"):
        Box("c", 0, 0, "c", kind="colourful")


def _tokens(vocab, *shape):
    return torch.randint(4, vocab, shape)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize("handover", [m for m in HANDOVERS if m in CONTEXT_MODES])
def test_encoder_decoder_shapes_are_the_model_s(handover, cell):
    config = Seq2SeqConfig(11, 13, embed_dim=6, hidden_size=10, cell=cell, context=handover)
    diagram = encoder_decoder_diagram(config, handover, batch=B)
    model = Seq2Seq(config).eval()
    src, tgt = _tokens(11, B, S), _tokens(13, B, T)
    context = model.encode(src)
    logits = model(src, None, tgt)
    assert diagram.arrow("h2", "c").shape.sizes == tuple(context.shape)
    assert diagram.arrow("s0", "p0").shape.sizes == tuple(logits[:, 0].shape)
    read = [a.shape.sizes[1] for a in diagram.arrows if a.end == "s0" and not a.dashed]
    assert sum(read) == model.decoder.rnn.input_size  # e(y) plus c where c is an input
    assert (("c", "start") in diagram.shapes()) == (handover in ("copy", "init", "both"))


def test_each_hand_over_mode_puts_c_where_it_says():
    config = Seq2SeqConfig(11, 13, embed_dim=6, hidden_size=10)
    slots = {mode: [diagram.by_key[f"z{t}"].text if f"z{t}" in diagram.by_key else None
                    for t in range(3)]
             for mode in HANDOVERS for diagram in [encoder_decoder_diagram(config, mode)]}
    assert slots == {"every_step": ["$c$"] * 3, "first_step": ["$c$", "0", "0"],
                     "copy": [None] * 3, "init": [None] * 3, "both": ["$c$"] * 3}
    starts = {mode: encoder_decoder_diagram(config, mode).by_key["start"].text
              for mode in HANDOVERS}
    assert starts["copy"] == "$s_0 = c$" and starts["every_step"] == "$s_0 = 0$"
    assert starts["init"] == starts["both"] == "$s_0 = \\tanh(W_{init}\\, c)$"
    with pytest.raises(ValueError, match="handover must be one of"):
        encoder_decoder_diagram(config, "sometimes")


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_bahdanau_shapes_are_the_model_s(cell):
    config = AttentionSeq2SeqConfig(11, 13, embed_dim=6, hidden_size=10, cell=cell)
    diagram = bahdanau_diagram(config, batch=B, src_len=S)
    model = AttentionSeq2Seq(config).eval()
    src, tgt = _tokens(11, B, S), _tokens(13, B, T)
    annotations, _ = model.encoder(src)
    logits, weights = model(src, None, tgt)
    assert diagram.arrow("enc", "h").shape.sizes == tuple(annotations.shape)
    assert diagram.arrow("softmax", "context").shape.sizes == tuple(weights[:, 0].shape)
    assert diagram.arrow("out", "yt").shape.sizes == tuple(logits[:, 0].shape)
    into_cell = [a.shape.sizes[1] for a in diagram.arrows
                 if a.end == "cell" and a.start in ("context", "y")]
    assert sum(into_cell) == model.decoder.cell.input_size


def test_drawing_prints_every_box_and_every_shape_once_per_box_or_arrow():
    config = AttentionSeq2SeqConfig(11, 13, embed_dim=6, hidden_size=10)
    diagram = bahdanau_diagram(config)
    figure = draw(diagram)
    texts = [t.get_text() for t in figure.axes[0].texts]
    assert all(box.text in texts for box in diagram.boxes)
    shown = diagram.box_shapes()
    assert shown["h"] == diagram.arrow("h", "score").shape == diagram.arrow("h", "context").shape
    for arrow in diagram.arrows:  # its shape is printed in its start box or beside it
        if arrow.shape is not None and arrow.start not in shown:
            assert str(arrow.shape) in diagram.arrow_label(arrow)
    assert diagram.arrow_label(diagram.arrow("s", "s_prev")) == "next step"
    assert sorted(str(shape) for shape in shown.values()) == sorted(
        t for t in texts if t.startswith("("))  # each box's shape printed once
    assert figure.get_facecolor()[:3] == (1.0, 1.0, 1.0)  # legible on a dark theme too
    plt.close(figure)


def test_a_box_whose_arrows_carry_two_shapes_leaves_them_on_the_arrows():
    dims = Dims({"B": 2, "H": 3, "V": 5})
    diagram = Diagram("t", [Box("a", 0, 0, "a"), Box("b", 0, 4, "b"), Box("c", 6, 0, "c")],
                      [Arrow("a", "b", dims("B", "H")), Arrow("a", "c", dims("B", "V"), "logits")],
                      dims)
    assert diagram.box_shapes() == {}
    assert diagram.arrow_label(diagram.arrow("a", "c")) == "logits (B, V)"
    with pytest.raises(ValueError, match="side must be"):
        Arrow("a", "b", side="up")


GALLERY = list(itertools.chain(lesson_diagrams(), wide_diagrams()))


@pytest.mark.parametrize("name,diagram", GALLERY, ids=[name for name, _ in GALLERY])
def test_every_word_reads_at_body_size_everywhere_and_none_overlaps(name, diagram):
    figure = draw(diagram)
    assert text_problems(figure) == []
    size = natural_size_px(figure)
    for display in DISPLAYS:
        assert shown_text_px(FONT_PT, size, display) >= display.body_px, display.name
    plt.close(figure)


def test_the_layout_check_finds_small_overlapping_and_escaping_words():
    figure = draw(bahdanau_diagram(AttentionSeq2SeqConfig(11, 13, embed_dim=6, hidden_size=10)))
    ax = figure.axes[0]
    title = next(t for t in ax.texts if t.get_text().startswith("Bahdanau"))
    ax.text(title.get_position()[0], title.get_position()[1], "next step", fontsize=FONT_PT,
            va="bottom")  # a label over the title, as the old drawing put one
    ax.text(ax.get_xlim()[1], 0, "outside", fontsize=FONT_PT)
    problems = text_problems(figure)
    assert any("'next step' overlaps" in p or "overlaps 'next step'" in p for p in problems)
    assert "'outside' leaves the figure" in problems
    for text in ax.texts:
        text.set_fontsize(7.5)  # the old labels' size
    small = text_problems(figure)
    assert any(f"px on the {SLIDES.name}" in p for p in small)
    assert any("px on the site" in p for p in small)
    plt.close(figure)


def test_self_attention_shapes_are_the_function_s():
    diagram = self_attention_diagram(d_model=12, d_k=6, batch=B, length=S)
    x = torch.randn(B, S, 12)
    w_q, w_k, w_v = (torch.randn(12, 6) for _ in range(3))
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    output, weights = scaled_dot_product_attention(q, k, v)
    assert diagram.arrow("wq", "score").shape.sizes == tuple(q.shape)
    assert diagram.arrow("softmax", "mix").shape.sizes == tuple(weights.shape)
    assert diagram.arrow("mix", "out").shape.sizes == tuple(output.shape)


def test_heads_shapes_are_multi_head_attention_s():
    diagram = heads_diagram(d_model=12, num_heads=3, batch=B, length=S)
    layer = MultiHeadAttention(12, 3).eval()
    x = torch.randn(B, S, 12)
    split = layer.split_heads(layer.q_proj(x))
    output, weights = layer(x, need_weights=True)
    assert diagram.arrow("split", "attend").shape.sizes == tuple(split.shape)
    assert diagram.arrow("merge", "wo").shape.sizes == tuple(layer.merge_heads(split).shape)
    assert "weights (B, h, T, T)" in diagram.by_key["attend"].text
    assert diagram.dims("B", "h", "T", "T").sizes == tuple(weights.shape)
    assert diagram.arrow("wo", "out").shape.sizes == tuple(output.shape)
    with pytest.raises(ValueError, match="divisible by num_heads, got 12 and 5"):
        heads_diagram(12, 5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_shapes_and_norm_order_are_the_model_s(norm_first):
    config = TransformerConfig(11, 13, d_model=8, num_heads=2, num_encoder_layers=1,
                               num_decoder_layers=1, d_ff=16, max_len=20, norm_first=norm_first)
    diagram = transformer_diagram(config, batch=B, src_len=S, tgt_len=T)
    model = Transformer(config).eval()
    src, tgt = _tokens(11, B, S), _tokens(13, B, T)
    memory = model.encode(src)
    logits = model(src, None, tgt)
    assert diagram.arrow("memory", "dec1").shape.sizes == tuple(memory.states.shape)
    assert diagram.dims("B", "T", "V").sizes == tuple(logits.shape)
    sublayers = [box.text for box in diagram.boxes if box.key[:3] in ("enc", "dec")]
    assert len(sublayers) == 5  # two in the encoder block, three in the decoder block
    order = r"$x + f(\mathrm{LN}(x))$" if norm_first else r"$\mathrm{LN}(x + f(x))$"
    assert all(text.endswith("\n" + order) for text in sublayers)  # residual and LayerNorm
    assert ("final LayerNorm" in diagram.by_key["memory"].text) == norm_first


def test_kv_cache_shapes_are_the_cache_s():
    diagram = kv_cache_diagram(d_model=12, num_heads=3, step=4, batch=B)
    layer, cache = MultiHeadAttention(12, 3).eval(), KVCache()
    steps = torch.randn(B, 4, 12)
    for t in range(4):
        output, _ = layer(steps[:, t:t + 1], cache=cache)
    assert diagram.arrow("cache", "attend").shape.sizes == tuple(cache.k.shape)
    assert diagram.arrow("attend", "out").shape.sizes == tuple(output.shape)
    with pytest.raises(ValueError, match="need step >= 1"):
        kv_cache_diagram(12, 3, step=0)


@pytest.mark.parametrize("local,feeding", [(None, True), ("p", True), (None, False)])
def test_luong_shapes_are_the_model_s(local, feeding):
    config = AttentionSeq2SeqConfig(11, 13, embed_dim=6, hidden_size=10, attention="luong",
                                    score="general", local=local, window=2,
                                    input_feeding=feeding)
    diagram = luong_diagram(config, batch=B, src_len=S)
    model = AttentionSeq2Seq(config).eval()
    src, tgt = _tokens(11, B, S), _tokens(13, B, T)
    logits, weights = model(src, None, tgt)
    assert diagram.arrow("softmax", "context").shape.sizes == tuple(weights[:, 0].shape)
    assert diagram.dims("B", "V").sizes == tuple(logits[:, 0].shape)
    into_cell = [a.shape.sizes[1] for a in diagram.arrows if a.end == "cell"]
    assert sum(into_cell) == model.decoder.cell.input_size  # e(y), plus s̃ with input feeding
    assert ("window" in diagram.by_key) == (local == "p")


@pytest.mark.parametrize("gate", [True, False])
def test_show_attend_tell_shapes_are_the_model_s(gate):
    config = CaptionerConfig(9, in_channels=3, channels=(4, 6), pool_after=(0, 1), embed_dim=5,
                             hidden_size=8, attention_size=6, read_convs=1, gate=gate)
    diagram = show_attend_tell_diagram(config, (32, 48), batch=B)
    model = ShowAttendTell(config).eval()
    images, tgt = torch.randn(B, 3, 32, 48), _tokens(9, B, T)
    features, _ = model.encode(images)
    output = model(images, tgt)
    assert diagram.arrow("a", "read").shape.sizes == tuple(features.shape)
    assert diagram.arrow("softmax", "read").shape.sizes == tuple(output.weights[:, 0].shape)
    assert diagram.dims("B", "V").sizes == tuple(output.logits[:, 0].shape)
    into_lstm = [a.shape.sizes[1] for a in diagram.arrows
                 if a.end == "lstm" and a.start in ("read", "y")]
    assert sum(into_lstm) == model.decoder.cell.input_size
    assert (r"\beta_t" in diagram.by_key["read"].text) == gate


def test_hard_vs_soft_shapes_are_the_pointer_net_s():
    config = PointerConfig(dim=6, value_dim=5, n_classes=7)
    diagram = hard_vs_soft_diagram(config, items=4, batch=B)
    model = PointerNet(config).eval()
    query, keys = torch.randn(B, 6), torch.randn(B, 4, 6)
    labels = torch.randint(0, 7, (B, 4))
    output = model(query, keys, labels)
    assert diagram.arrow("score", "softmax").shape.sizes == tuple(output.weights.shape)
    assert diagram.arrow("classify", "label").shape.sizes == tuple(output.logits.shape)
    assert diagram.arrow("values", "soft").shape.sizes == tuple(model.values(labels).shape)


def test_a_context_per_step_reads_every_encoder_state():
    config = Seq2SeqConfig(11, 13, embed_dim=6, hidden_size=10)
    diagram = context_per_step_diagram(config, batch=B)
    assert "c" not in diagram.by_key
    for t in range(3):
        sources = sorted(a.start for a in diagram.arrows
                         if a.end == f"z{t}" and a.start.startswith("h"))
        assert sources == ["h0", "h1", "h2"]
        assert diagram.arrow(f"z{t}", f"s{t}").shape == diagram.dims("B", "H")


def test_a_context_per_step_is_queried_by_the_decoder_s_previous_state():
    # without an arrow from the decoder into c_t, nothing would make c_t differ between steps
    config = Seq2SeqConfig(11, 13, embed_dim=6, hidden_size=10)
    diagram = context_per_step_diagram(config, batch=B)
    for t, query in enumerate(["start", "s0", "s1"]):  # s_0, s_1, s_2 query c_1, c_2, c_3
        diagram.arrow(query, f"z{t}")
        assert diagram.by_key[f"z{t}"].text == f"$c_{t + 1}$"
    assert "s_0" in diagram.by_key["start"].text
    assert diagram.arrow("h2", "start").shape == diagram.dims("B", "H")  # s_0 from h_S


@pytest.mark.parametrize("read_convs", [0, 2])
def test_show_attend_tell_draws_the_read_convs_and_every_input_of_the_deep_output(read_convs):
    config = CaptionerConfig(9, in_channels=3, channels=(4, 6), pool_after=(0, 1), embed_dim=5,
                             hidden_size=8, attention_size=6, read_convs=read_convs,
                             pool_before_norm=True)
    diagram = show_attend_tell_diagram(config, (32, 48), batch=B)
    model = ShowAttendTell(config).eval()
    images = torch.randn(B, 3, 32, 48)
    with torch.no_grad():
        grid = model.encoder.layers(images)  # (B, C', H', W'): the CNN's output, not flattened
        features, _ = model.encode(images)
    assert diagram.arrow("cnn", "a").shape.sizes == tuple(grid.shape)
    assert diagram.arrow("a", "score").shape.sizes[-1] == model.decoder.key_size
    assert diagram.arrow("a", "read").shape.sizes == tuple(features.shape)
    # AttentionLSTMDecoder.step: logits = out(E[y_{t-1}] + out_h(s_t) + out_z(c_t))
    decoder = model.decoder
    into_out = {a.start: a.shape.sizes[-1] for a in diagram.arrows if a.end == "out"}
    assert into_out == {"y": decoder.embedding.embedding_dim, "h": decoder.out_h.in_features,
                        "read": decoder.out_z.in_features}
    assert diagram.arrow("out", "p").shape.sizes == (B, decoder.out.out_features)
    assert ("wide" in diagram.by_key["a"].text) == bool(read_convs)
    if read_convs:  # the read convs run on the CNN's grid, and their view is appended to h_j
        assert diagram.arrow("cnn", "wide").shape.sizes == tuple(grid.shape)
        diagram.arrow("wide", "a")
        assert diagram.by_key["wide"].text.startswith(f"{read_convs} read")
        assert features.shape[-1] == model.encoder.key_size + grid.shape[1]
    else:
        assert "wide" not in diagram.by_key
