"""The keys of the computed self-check questions of lessons 00-05, recomputed with course_lib:
``COMPUTED["04.context-shape"]()`` returns what the bank's right answer must equal."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch
from torch.utils.data import DataLoader, TensorDataset

from course_lib.data.vocab import EOS_ID
from course_lib.lessons.contexts import sequential_steps
from course_lib.lessons.lookup import (
    lookup_gradient_norms,
    make_lookup_task,
    sample_hard_attention,
    soft_attention,
)
from course_lib.lessons.tastes import taste_example
from course_lib.metrics import bleu
from course_lib.models import count_parameters
from course_lib.models.attention_seq2seq import AttentionSeq2Seq, AttentionSeq2SeqConfig
from course_lib.models.seq2seq import Seq2Seq, Seq2SeqConfig
from course_lib.models.toy import ToyClassifier, ToyConfig, make_spirals
from course_lib.nn.attention import (
    AdditiveScore,
    attention_context,
    local_attention,
    make_score,
    masked_softmax,
)
from course_lib.nn.cells import ScratchLSTMCell, ScratchRNNCell
from course_lib.nn.similarity import (
    cosine_matrix,
    one_hot,
    one_hot_lookup,
    output_distribution,
    softmax_with_temperature,
)
from course_lib.seeding import make_generator


def _generator() -> torch.Generator:
    return make_generator(0)


def _tiny_attention_model(**options) -> AttentionSeq2Seq:
    torch.manual_seed(0)
    config = AttentionSeq2SeqConfig(30, 30, embed_dim=8, hidden_size=16, **options)
    return AttentionSeq2Seq(config).eval()


# ---------------------------------------------------------------------------------------------
# 00 · Start here
# ---------------------------------------------------------------------------------------------


def steps_per_epoch() -> int:
    points, labels = make_spirals(400, noise=0.04, seed=0)  # n_points = 400 in the full profile
    return len(DataLoader(TensorDataset(points, labels), batch_size=64, shuffle=True))


def toy_parameters() -> int:
    return count_parameters(ToyClassifier(ToyConfig(hidden=64, layers=2)))


def map_shape() -> list[int]:
    model = _tiny_attention_model()
    src = torch.randint(4, 30, (1, 7), generator=_generator())  # 6 words + <eos>
    src[0, -1] = EOS_ID
    tgt_in = torch.randint(4, 30, (1, 9), generator=_generator())  # <bos> + 8 words
    with torch.no_grad():
        _, weights = model(src, None, tgt_in)  # (1, T, S)
    return list(weights[0].shape)


def gold_weight() -> float:
    row = torch.tensor([2.0, -2.0, -2.0, -2.0, -2.0])  # the gold cell first, as in cell 1c7940cb
    return softmax_with_temperature(row, 1.0)[0].item()


# ---------------------------------------------------------------------------------------------
# 01 · Embeddings
# ---------------------------------------------------------------------------------------------


def one_hot_gram() -> float:
    X = one_hot(torch.arange(5), 5)  # (V, V)
    return (X @ X.T).sum().item()


def lookup_shape() -> list[int]:
    E = torch.randn(6, 4, generator=_generator())  # (V, d)
    ids = torch.randint(0, 6, (2, 3), generator=_generator())  # (B, T)
    return list(one_hot_lookup(E, ids).shape)


def ana_star_raiders() -> float:
    return taste_example().scores()[0, 0].item()  # Ana (row 0), Star Raiders (column 0)


def dev_cosine_ratio() -> float:
    movies = taste_example()
    louder = movies.user_tastes.clone()
    louder[3] *= 10  # Dev, ten times as enthusiastic
    ratio = cosine_matrix(louder, movies.movie_features)[3] / movies.cosines()[3]
    return round(ratio.mean().item(), 3)


def hot_softmax() -> float:
    return softmax_with_temperature(torch.tensor([2.0, 1.0, 0.0]), 0.5)[0].item()


def logits_shape() -> list[int]:
    hidden = torch.randn(4, 50, generator=_generator())  # (B, d)
    W_out = torch.randn(1000, 50, generator=_generator())  # (V, d)
    logits, _ = output_distribution(hidden, W_out)
    return list(logits.shape)


# ---------------------------------------------------------------------------------------------
# 02 · The RNN encoder–decoder
# ---------------------------------------------------------------------------------------------


def rnn_cell_parameters() -> int:
    return count_parameters(ScratchRNNCell(4, 6))


def lstm_cell_parameters() -> int:
    return count_parameters(ScratchLSTMCell(4, 6))


def every_step_extra() -> int:
    """Parameters that reading c at every step adds to a decoder that reads E[y_{t-1}] alone."""
    config = Seq2SeqConfig(200, 300, embed_dim=64, hidden_size=128)
    every_step = Seq2Seq(replace(config, context="every_step"))
    init = Seq2Seq(replace(config, context="init"))  # E[y] only as input, plus W_init
    return (count_parameters(every_step) - count_parameters(init)
            + count_parameters(init.decoder.init))


def prefix_bleu() -> float:
    reference = "le petit chat noir dort sur le canapé rouge ."  # 10 tokens
    hypothesis = " ".join(reference.split()[:8])  # its first 8 tokens
    return bleu([hypothesis], [reference])


def context_vector_shape() -> list[int]:
    torch.manual_seed(0)
    model = Seq2Seq(Seq2SeqConfig(50, 50, embed_dim=8, hidden_size=16)).eval()
    src = torch.randint(4, 50, (3, 7), generator=_generator())  # (B, S)
    with torch.no_grad():
        return list(model.encode(src).shape)


# ---------------------------------------------------------------------------------------------
# 03 · The bottleneck
# ---------------------------------------------------------------------------------------------


def width_factor() -> float:
    sizes = []
    for hidden in (256, 512):
        model = Seq2Seq(Seq2SeqConfig(10, 10, embed_dim=8, hidden_size=hidden))
        sizes.append(model.encoder.rnn.weight_hh_l0.numel())
    return sizes[1] / sizes[0]


def reread_steps() -> int:
    steps, _ = sequential_steps("re-read per step", source=10, target=20)
    return steps


def soft_output_shape() -> list[int]:
    generator = _generator()
    query = torch.randn(4, 16, generator=generator)  # (B, d)
    keys = torch.randn(4, 8, 16, generator=generator)  # (B, S, d)
    values = torch.randn(4, 8, 5, generator=generator)  # (B, S, d_v)
    output, _ = soft_attention(query, keys, values)
    return list(output.shape)


def hot_soft_attention() -> float:
    query = torch.tensor([[1.0]])  # (1, d = 1)
    keys = torch.tensor([[[0.0], [1.0], [0.5]]])  # (1, 3, 1): item 2 (value 3) matches best
    values = torch.tensor([[[1.0], [3.0], [8.0]]])  # (1, 3, 1)
    output, _ = soft_attention(query, keys, values, temperature=1e6)
    return round(output.item(), 3)


def hard_gradient() -> float:
    task = make_lookup_task(n_examples=16, n_items=8, dim=8, seed=0)
    return lookup_gradient_norms(task)["hard_autograd"]


def gumbel_frequency() -> float:
    draws = 20000
    probabilities = torch.tensor([0.5, 0.3, 0.2])
    query = torch.ones(draws, 1)  # (draws, 1): scores k_j · q = log a_j
    keys = probabilities.log().view(1, 3, 1).expand(draws, -1, -1)  # (draws, 3, 1)
    values = torch.eye(3).unsqueeze(0).expand(draws, -1, -1)  # (draws, 3, 3)
    _, samples = sample_hard_attention(query, keys, values, generator=_generator())
    return samples[:, 1].mean().item()  # how often the item of probability 0.3 is drawn


# ---------------------------------------------------------------------------------------------
# 04 · Bahdanau attention
# ---------------------------------------------------------------------------------------------


def additive_parameters() -> int:
    return count_parameters(AdditiveScore(256, 256))


def forward_half_changes() -> int:
    model = _tiny_attention_model()
    src = torch.randint(4, 29, (1, 10), generator=_generator())  # positions 0 ... 9
    edited = src.clone()
    edited[0, 6] += 1  # another word at position 6
    with torch.no_grad():
        annotations, _ = model.encoder(torch.cat([src, edited]))  # (2, S, H)
    half = model.config.hidden_size // 2
    change = (annotations[0, :, :half] - annotations[1, :, :half]).norm(dim=-1)  # (S,)
    return int((change > 1e-6).sum())


def prepare_shape() -> list[int]:
    score = AdditiveScore(query_size=6, key_size=10, attention_size=4)
    keys = torch.randn(3, 12, 10, generator=_generator())  # (B, S, d_k)
    return list(score.prepare(keys).shape)


def all_steps_shape() -> list[int]:
    score = AdditiveScore(query_size=6, key_size=10, attention_size=4)
    prepared = score.prepare(torch.randn(3, 12, 10, generator=_generator()))
    queries = torch.randn(3, 5, 6, generator=_generator())  # (B, T, d_q)
    return list(score(queries, prepared).shape)


def masked_first_weight() -> float:
    scores = torch.tensor([[3.0, 1.0, 2.0]])
    mask = torch.tensor([[True, True, False]])
    return masked_softmax(scores, mask)[0, 0].item()


def context_shape() -> list[int]:
    weights = torch.rand(2, 7, 9, generator=_generator()).softmax(dim=-1)  # (B, T, S)
    annotations = torch.randn(2, 9, 16, generator=_generator())  # (B, S, H)
    return list(attention_context(weights, annotations).shape)


def score_count() -> int:
    model = _tiny_attention_model()
    src = torch.randint(4, 30, (1, 10), generator=_generator())  # 9 words + <eos>
    src[0, -1] = EOS_ID
    tgt_in = torch.randint(4, 30, (1, 12), generator=_generator())  # <bos> + 11 words
    with torch.no_grad():
        _, weights = model(src, None, tgt_in)  # (1, T, S): one e_tj behind every weight
    return weights.numel()


# ---------------------------------------------------------------------------------------------
# 05 · Luong attention
# ---------------------------------------------------------------------------------------------


def concat_parameters() -> int:
    return count_parameters(make_score("concat", 4, 10))


def dot_spread() -> float:
    generator = _generator()
    q = torch.randn(512, 144, generator=generator)  # (B, H)
    k = torch.randn(512, 30, 144, generator=generator)  # (B, S, H)
    return make_score("dot", 144, 144).score(q, k).std().item()


def concat_hidden_shape() -> list[int]:
    score = make_score("concat", 6, 6)
    seen = []
    score.v.register_forward_hook(lambda module, inputs, output: seen.append(inputs[0].shape))
    generator = _generator()
    queries = torch.randn(2, 3, 6, generator=generator)  # (B, T, H)
    keys = torch.randn(2, 5, 6, generator=generator)  # (B, S, H)
    with torch.no_grad():
        score.score(queries, keys)
    return list(seen[0])  # what v reads: the tanh of every (step, position) pair


def bahdanau_steps_that_move() -> int:
    src = torch.randint(4, 30, (1, 8), generator=_generator())
    tgt_in = torch.randint(4, 30, (1, 6), generator=_generator())  # words read at steps 0 ... 5
    changed = tgt_in.clone()
    changed[0, 3] = 4 + (tgt_in[0, 3] - 3) % 26  # another word, read at step 3
    model = _tiny_attention_model(attention="bahdanau", score="additive")
    with torch.no_grad():
        _, before = model(src, None, tgt_in)
        _, after = model(src, None, changed)
    return int(((after - before).abs().amax(dim=-1)[0] > 0).sum())


def feeding_input_size() -> int:
    config = AttentionSeq2SeqConfig(30, 30, embed_dim=32, hidden_size=64, attention="luong",
                                    score="general", scaled=True)  # luong-general, lesson size
    return AttentionSeq2Seq(config).decoder.cell.input_size


def local_m_positions() -> int:
    model = _tiny_attention_model(attention="luong", score="general", local="m", window=10)
    src = torch.randint(4, 30, (1, 12), generator=_generator())  # S_b = 12, no padding
    with torch.no_grad():
        source, _ = model.encode(src)
        query = torch.randn(1, 16, generator=_generator())  # s_t
        weights = model.decoder.attend(query, source, t=15)  # (1, S)
    return int((weights > 0).sum())


def empty_window_sum() -> float:
    scores = torch.randn(1, 12, generator=_generator())  # (B, S)
    return local_attention(scores, torch.tensor([7.5]), half_width=0).sum().item()


def no_feeding_saving() -> int:
    counts = []
    for feeding in (True, False):
        config = AttentionSeq2SeqConfig(10, 10, embed_dim=128, hidden_size=256, attention="luong",
                                        score="general", scaled=True, input_feeding=feeding)
        counts.append(count_parameters(AttentionSeq2Seq(config)))
    return counts[0] - counts[1]


COMPUTED: dict[str, Callable[[], object]] = {
    "00.steps-per-epoch": steps_per_epoch,
    "00.toy-params": toy_parameters,
    "00.map-shape": map_shape,
    "00.gold-weight": gold_weight,
    "01.onehot-gram": one_hot_gram,
    "01.lookup-shape": lookup_shape,
    "01.ana-score": ana_star_raiders,
    "01.louder-cosine": dev_cosine_ratio,
    "01.temperature-half": hot_softmax,
    "01.logits-shape": logits_shape,
    "02.rnn-params": rnn_cell_parameters,
    "02.lstm-params": lstm_cell_parameters,
    "02.every-step-params": every_step_extra,
    "02.bleu-prefix": prefix_bleu,
    "02.context-shape": context_vector_shape,
    "03.width-factor": width_factor,
    "03.reread-steps": reread_steps,
    "03.soft-output-shape": soft_output_shape,
    "03.hot-temperature": hot_soft_attention,
    "03.hard-gradient": hard_gradient,
    "03.gumbel-frequency": gumbel_frequency,
    "04.score-params": additive_parameters,
    "04.forward-half": forward_half_changes,
    "04.prepare-shape": prepare_shape,
    "04.all-steps-shape": all_steps_shape,
    "04.masked-weight": masked_first_weight,
    "04.context-shape": context_shape,
    "04.score-count": score_count,
    "05.concat-params": concat_parameters,
    "05.dot-spread": dot_spread,
    "05.concat-hidden-shape": concat_hidden_shape,
    "05.bahdanau-late": bahdanau_steps_that_move,
    "05.feeding-input": feeding_input_size,
    "05.local-m-count": local_m_positions,
    "05.empty-window": empty_window_sum,
    "05.no-feeding-params": no_feeding_saving,
}
