"""Every diagram the lessons draw, with the configs the lessons use (this profile's), and once
more with sizes of many digits (the longest labels a config can give)."""

from __future__ import annotations

from dataclasses import replace

from course_lib.data.captions import caption_set, caption_vocab
from course_lib.diagrams import (
    HANDOVERS,
    bahdanau_diagram,
    context_per_step_diagram,
    encoder_decoder_diagram,
    hard_vs_soft_diagram,
    heads_diagram,
    kv_cache_diagram,
    luong_diagram,
    self_attention_diagram,
    show_attend_tell_diagram,
    transformer_diagram,
)
from course_lib.experiments.bottleneck import bottleneck_config
from course_lib.experiments.captioning import CaptioningSettings
from course_lib.experiments.transformer import TransformerSettings
from course_lib.models.attention_seq2seq import AttentionSeq2SeqConfig
from course_lib.models.pointer import PointerConfig
from course_lib.models.seq2seq import Seq2SeqConfig

WIDE = 12_340  # a size of five digits (even, as a bidirectional encoder needs)


def lesson_diagrams():
    """(name, diagram) for each diagram a lesson draws, as the lesson draws it."""
    lesson_02 = Seq2SeqConfig(200, 300, embed_dim=64, hidden_size=128)
    for handover in HANDOVERS:
        yield f"02-{handover}", encoder_decoder_diagram(lesson_02, handover)
    none = bottleneck_config("none")
    yield "03-handover", encoder_decoder_diagram(none, none.context)
    yield "03-per-step", context_per_step_diagram(none)
    yield "04-bahdanau", bahdanau_diagram(bottleneck_config("bahdanau"))
    yield "05-luong-local", luong_diagram(bottleneck_config("luong-local"))
    yield "06-hard-soft", hard_vs_soft_diagram(PointerConfig(n_classes=16), items=8)
    digits = caption_set("digits", 6, "train", seed=0)
    config = CaptioningSettings.build("digits", 0, caption_vocab([digits])).model
    yield "07-show-attend-tell", show_attend_tell_diagram(config, tuple(digits.images.shape[2:]))
    yield "08-self-attention", self_attention_diagram(d_model=16, d_k=16, batch=1, length=10)
    yield "09-heads", heads_diagram(d_model=12, num_heads=3, batch=2, length=5)
    yield "10-transformer", transformer_diagram(TransformerSettings.build(0).model)
    yield "11-kv-cache", kv_cache_diagram(d_model=32, num_heads=4, step=5, batch=2)


def wide_diagrams():
    """The diagrams of every config variant with five-digit sizes."""
    seq2seq = Seq2SeqConfig(WIDE, WIDE, embed_dim=WIDE, hidden_size=WIDE)
    for handover in HANDOVERS:
        yield f"wide-02-{handover}", encoder_decoder_diagram(seq2seq, handover, batch=WIDE)
    yield "wide-03-per-step", context_per_step_diagram(seq2seq, batch=WIDE)
    attention = AttentionSeq2SeqConfig(WIDE, WIDE, embed_dim=WIDE, hidden_size=WIDE)
    yield "wide-04-bahdanau", bahdanau_diagram(attention, batch=WIDE, src_len=WIDE)
    for local, feeding, score in [(None, True, "dot"), ("p", True, "concat"),
                                  ("p", False, "general")]:
        luong = replace(attention, attention="luong", score=score, local=local, window=50,
                        input_feeding=feeding, scaled=score != "concat")
        yield f"wide-05-{local}-{feeding}-{score}", luong_diagram(luong, WIDE, WIDE)
    yield "wide-06-hard-soft", hard_vs_soft_diagram(
        PointerConfig(dim=WIDE, value_dim=WIDE, n_classes=WIDE), items=WIDE, batch=WIDE)
    settings = CaptioningSettings.build("digits", 0, ["word"] * WIDE)
    for gate in (True, False):
        config = replace(settings.model, vocab_size=WIDE, hidden_size=WIDE, embed_dim=WIDE,
                         gate=gate)
        yield f"wide-07-gate-{gate}", show_attend_tell_diagram(config, (WIDE, WIDE), WIDE)
    yield "wide-08-self-attention", self_attention_diagram(WIDE, WIDE, WIDE, WIDE)
    yield "wide-09-heads", heads_diagram(WIDE * 5, 5, WIDE, WIDE)
    for norm_first in (True, False):
        config = replace(TransformerSettings.build(0).model, d_model=WIDE, d_ff=WIDE,
                         tgt_vocab_size=WIDE, norm_first=norm_first, num_encoder_layers=12,
                         num_decoder_layers=12)
        yield f"wide-10-norm-first-{norm_first}", transformer_diagram(config, WIDE, WIDE, WIDE)
    yield "wide-11-kv-cache", kv_cache_diagram(WIDE * 5, 5, step=WIDE, batch=WIDE)
