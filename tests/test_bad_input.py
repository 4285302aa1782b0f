"""Bad input gets a clear error, never a wrong answer: a table of bad calls across the public API,
each raising the right exception with a message that names the argument; guard cases that good
input still works; and a property test that no public function returns NaN for finite input."""

import math

import pytest
import torch

from course_lib.arguments import (
    check_index,
    check_lengths,
    check_mask,
    check_qkv,
    check_sentences,
    check_tensor,
    check_token_ids,
)
from course_lib.data.batching import BatchIterator, make_batch, pad
from course_lib.data.captions import CaptionSet, caption_batch
from course_lib.data.vocab import PAD_ID, Vocab
from course_lib.lessons.document_qa import answer_questions, make_document
from course_lib.lessons.kernel_regression import nadaraya_watson
from course_lib.lessons.lookup import hard_attention, soft_attention
from course_lib.lessons.photos import grid_attention
from course_lib.lessons.probe import word_at
from course_lib.metrics import (
    accuracy,
    alignment_accuracy,
    bleu,
    bleu_by_length,
    localization_accuracy,
)
from course_lib.models.attention_seq2seq import AttentionSeq2Seq, AttentionSeq2SeqConfig
from course_lib.models.captioner import CaptionerConfig, ShowAttendTell, doubly_stochastic_penalty
from course_lib.models.pointer import PointerConfig, PointerNet, pointer_task
from course_lib.models.reencode import ReencodeConfig, ReencodingSeq2Seq
from course_lib.models.seq2seq import Seq2Seq, Seq2SeqConfig
from course_lib.models.torch_transformer import TorchTransformer
from course_lib.models.transformer import Transformer, TransformerConfig
from course_lib.nn.attention import (
    AdditiveScore,
    DotScore,
    attention_context,
    local_attention,
    masked_softmax,
    padding_mask,
)
from course_lib.nn.cells import ScratchGRUCell, ScratchLSTMCell
from course_lib.nn.decoding import beam_search
from course_lib.nn.efficient import blockwise_attention, reach, window_mask
from course_lib.nn.gumbel import gumbel_max_sample, sample_item, straight_through_gumbel
from course_lib.nn.positions import LearnedPositions, SinusoidalPositions
from course_lib.nn.self_attention import (
    MultiHeadAttention,
    causal_mask,
    fused_attention,
    scaled_dot_product_attention,
)
from course_lib.nn.similarity import (
    cosine_similarity,
    entropy,
    one_hot,
    softmax_with_temperature,
)

torch.manual_seed(0)
META = torch.device("meta")
SENTENCE = "le chat noir dort sur le tapis"
TRANSFORMER = Transformer(TransformerConfig(120, 120, d_model=8, num_heads=2,
                                            num_encoder_layers=1, num_decoder_layers=1, d_ff=16,
                                            max_len=12)).eval()
SEQ2SEQ = Seq2Seq(Seq2SeqConfig(20, 20, embed_dim=6, hidden_size=8)).eval()
BAHDANAU = AttentionSeq2Seq(AttentionSeq2SeqConfig(20, 20, embed_dim=6, hidden_size=8)).eval()
LUONG = AttentionSeq2Seq(AttentionSeq2SeqConfig(20, 20, embed_dim=6, hidden_size=8, cell="lstm",
                                                attention="luong", score="general", local="p",
                                                window=2)).eval()
REENCODE = ReencodingSeq2Seq(ReencodeConfig(20, 20, 6, 8)).eval()
TORCH_TRANSFORMER = TorchTransformer(TRANSFORMER.config).eval()
CAPTIONER = ShowAttendTell(CaptionerConfig(9, in_channels=3, channels=(4, 6), pool_after=(0,),
                                           embed_dim=5, hidden_size=8,
                                           attention_size=6)).eval()
POINTER = PointerNet(PointerConfig(dim=4, n_classes=6))
MHA = MultiHeadAttention(8, 2)
PAIRS = [{"en": "the cat sleeps .", "fr": "le chat dort ."}, {"en": "a dog .", "fr": "un chien ."}]
VOCAB = Vocab.build([p["en"] for p in PAIRS] + [p["fr"] for p in PAIRS])
CAPTIONS = CaptionSet("digits", "train", torch.zeros(2, 1, 8, 8), [["one"], ["two"]],
                      [[None], [None]])


def ids(*shape, high=20):
    return torch.randint(4, high, shape)


def scores_with(mask, shape=(3, 3, 3)):
    return lambda: masked_softmax(torch.zeros(shape), mask)


def qkv(batch=2, heads=2, queries=3, keys=4, dim=8):
    return (torch.randn(batch, heads, queries, dim), torch.randn(batch, heads, keys, dim),
            torch.randn(batch, heads, keys, dim))


def additive(query, keys):
    score = AdditiveScore(4, 4, 5)
    return score(query, score.prepare(keys))


# (id, call, exception type, a pattern naming the argument)
BAD_CALLS = [
    # --- metrics
    ("bleu of two strings", lambda: bleu(SENTENCE, SENTENCE), TypeError, r"hypotheses.*\[hyp"),
    ("bleu of a string reference", lambda: bleu([SENTENCE], SENTENCE), TypeError, "references"),
    ("bleu of ids", lambda: bleu([[1, 2]], [SENTENCE]), TypeError, r"hypotheses\[0\]"),
    ("bleu_by_length of strings", lambda: bleu_by_length(SENTENCE, SENTENCE, [7]), TypeError,
     "hypotheses"),
    ("bleu_by_length float length", lambda: bleu_by_length([SENTENCE], [SENTENCE], [2.5]),
     TypeError, "source_lengths"),
    ("bleu_by_length length 0", lambda: bleu_by_length([SENTENCE], [SENTENCE], [0]),
     ValueError, "source_lengths"),
    ("accuracy of integer logits", lambda: accuracy(torch.zeros(2, 3, dtype=torch.long),
                                                    torch.zeros(2, dtype=torch.long)),
     TypeError, "logits"),
    ("accuracy of float targets", lambda: accuracy(torch.zeros(2, 3), torch.zeros(2)),
     TypeError, "targets"),
    ("accuracy across devices", lambda: accuracy(torch.zeros(2, 3),
                                                 torch.zeros(2, dtype=torch.long, device=META)),
     ValueError, "targets"),
    ("alignment_accuracy of integer maps",
     lambda: alignment_accuracy([torch.eye(2, dtype=torch.long)], [[[[0], [0]]]]), TypeError,
     r"weights\[0\]"),
    ("localization_accuracy of string captions",
     lambda: localization_accuracy([torch.zeros(1, 4)], ["one"], [["one"]], [[None]], (2, 2),
                                   (8, 8), {"one"}), TypeError, r"generated\[0\]"),
    # --- masks and lengths
    ("padding_mask length past max_len", lambda: padding_mask([5, 2], max_len=3), ValueError,
     r"lengths must hold integers in \[0, 3\]"),
    ("padding_mask negative length", lambda: padding_mask([-1, 2], max_len=3), ValueError,
     "lengths"),
    ("padding_mask float length", lambda: padding_mask([2.5, 2], max_len=3), TypeError,
     "lengths"),
    ("padding_mask float tensor", lambda: padding_mask(torch.tensor([2.5, 2.0]), 3), TypeError,
     "lengths"),
    ("padding_mask (1, B) lengths", lambda: padding_mask(torch.tensor([[1, 2]]), 3), ValueError,
     "lengths"),
    ("padding_mask string lengths", lambda: padding_mask("12", 3), TypeError, "lengths"),
    ("padding_mask negative max_len", lambda: padding_mask([0], -1), ValueError, "max_len"),
    ("masked_softmax (B, S) mask on (B, T, S) scores", scores_with(torch.eye(3, dtype=torch.bool)),
     ValueError, r"mask\[:, None, :\]"),
    ("masked_softmax integer scores",
     lambda: masked_softmax(torch.zeros(2, 3, dtype=torch.long)), TypeError,
     "scores must be a floating-point tensor, got torch.int64"),
    ("masked_softmax float mask", scores_with(torch.ones(3, 3, 3)), TypeError, "mask"),
    ("masked_softmax mask on another device",
     scores_with(torch.ones(3, 3, 3, dtype=torch.bool, device=META)), ValueError,
     r"mask is on meta but scores is on cpu; move it with mask.to\('cpu'\)"),
    ("masked_softmax mask of the wrong size", scores_with(torch.ones(3, 3, 2, dtype=torch.bool)),
     ValueError, "mask"),
    ("masked_softmax scores as a list", lambda: masked_softmax([0.0, 1.0]), TypeError, "scores"),
    ("attention_context integer weights",
     lambda: attention_context(torch.ones(2, 3, dtype=torch.long), torch.zeros(2, 3, 4)),
     TypeError, "weights"),
    ("attention_context across devices",
     lambda: attention_context(torch.ones(2, 3), torch.zeros(2, 3, 4, device=META)),
     ValueError, "values"),
    ("additive score float64 query",
     lambda: additive(torch.zeros(2, 4, dtype=torch.float64), torch.zeros(2, 3, 4)), TypeError,
     "query"),
    ("additive score keys on meta", lambda: additive(torch.zeros(2, 4),
                                                    torch.zeros(2, 3, 4, device=META)),
     ValueError, "keys"),
    ("dot score float16 query", lambda: DotScore(4)(torch.zeros(2, 4, dtype=torch.float16),
                                                   torch.zeros(2, 3, 4)), TypeError, "query"),
    ("local_attention negative half-width",
     lambda: local_attention(torch.zeros(2, 5), torch.zeros(2), -1), ValueError, "half_width"),
    ("local_attention (S,) mask", lambda: local_attention(
        torch.zeros(2, 5), torch.zeros(2), 1, torch.ones(5, dtype=torch.bool)), ValueError,
     "mask"),
    ("local_attention center on meta",
     lambda: local_attention(torch.zeros(2, 5), torch.zeros(2, device=META), 1), ValueError,
     "center"),
    # --- self-attention
    ("sdpa (T, S) mask on (B, h, T, S) scores",
     lambda: scaled_dot_product_attention(*qkv(), torch.ones(3, 4, dtype=torch.bool)),
     ValueError, r"mask\[None, None\]"),
    ("sdpa key on meta", lambda: scaled_dot_product_attention(
        qkv()[0], qkv()[1].to(META), qkv()[2]), ValueError, "key is on meta"),
    ("sdpa float64 value", lambda: scaled_dot_product_attention(
        *qkv()[:2], qkv()[2].double()), TypeError, "value"),
    ("sdpa integer query", lambda: scaled_dot_product_attention(
        qkv()[0].long(), *qkv()[1:]), TypeError, "query"),
    ("fused_attention float mask",
     lambda: fused_attention(*qkv(), torch.ones(1, 1, 3, 4)), TypeError, "mask"),
    ("causal_mask(-1)", lambda: causal_mask(-1), ValueError, "queries"),
    ("causal_mask(2.5)", lambda: causal_mask(2.5), TypeError, "queries"),
    ("causal_mask negative keys", lambda: causal_mask(2, -1), ValueError, "keys"),
    ("multi-head float64 query", lambda: MHA(torch.zeros(2, 3, 8, dtype=torch.float64)),
     TypeError, r"query has dtype torch.float64 but the module's parameters are torch.float32"),
    ("multi-head query on meta", lambda: MHA(torch.zeros(2, 3, 8, device=META)), ValueError,
     r"query is on meta but the module's parameters are on cpu; move it with "
     r"query.to\('cpu'\)"),
    ("multi-head key_mask of the wrong shape",
     lambda: MHA(torch.zeros(2, 3, 8), key_mask=torch.ones(3, 2, dtype=torch.bool)), ValueError,
     "key_mask"),
    ("multi-head float key_mask", lambda: MHA(torch.zeros(2, 3, 8), key_mask=torch.ones(2, 3)),
     TypeError, "key_mask"),
    ("multi-head (T, S) attn_mask",
     lambda: MHA(torch.zeros(2, 3, 8), attn_mask=torch.ones(3, 3, dtype=torch.bool)), ValueError,
     r"attn_mask\[None\]"),
    # --- efficient attention
    ("blockwise block_size 0", lambda: blockwise_attention(*qkv(), block_size=0), ValueError,
     "block_size"),
    ("blockwise integer query", lambda: blockwise_attention(qkv()[0].long(), *qkv()[1:]),
     TypeError, "query"),
    ("window_mask float width", lambda: window_mask(3, 3, 1.5), TypeError, "half_width"),
    ("reach of a float mask", lambda: reach(torch.ones(3, 3), 1), TypeError, "mask"),
    ("reach of 0 layers", lambda: reach(causal_mask(3), 0), ValueError, "layers"),
    # --- similarity, positions, Gumbel, cells, decoding
    ("softmax temperature 0", lambda: softmax_with_temperature(torch.zeros(3), 0.0), ValueError,
     "temperature"),
    ("cosine of integer vectors", lambda: cosine_similarity(torch.ones(3, dtype=torch.long),
                                                            torch.ones(3)), TypeError, "a"),
    ("cosine across devices", lambda: cosine_similarity(torch.ones(3),
                                                        torch.ones(3, device=META)),
     ValueError, "b is on meta"),
    ("one_hot id past the vocabulary", lambda: one_hot(torch.tensor([5]), 5), IndexError,
     "indices"),
    ("entropy of integer probabilities", lambda: entropy(torch.ones(3, dtype=torch.long)),
     TypeError, "probs"),
    ("sinusoidal negative offset", lambda: SinusoidalPositions(8, 10)(torch.zeros(1, 2, 8), -1),
     ValueError, "offset"),
    ("sinusoidal integer x", lambda: SinusoidalPositions(8, 10)(torch.zeros(1, 2, 8).long()),
     TypeError, "x"),
    ("learned positions x on meta",
     lambda: LearnedPositions(8, 10)(torch.zeros(1, 2, 8, device=META)), ValueError, "x is on"),
    ("gumbel_max_sample (S,) mask", lambda: gumbel_max_sample(
        torch.zeros(2, 4), mask=torch.ones(4, dtype=torch.bool)), ValueError, "mask"),
    ("straight-through temperature -1",
     lambda: straight_through_gumbel(torch.zeros(2, 4), -1.0), ValueError, "temperature"),
    ("sample_item integer scores", lambda: sample_item(torch.zeros(2, 4, dtype=torch.long)),
     TypeError, "scores"),
    ("GRU cell float64 x", lambda: ScratchGRUCell(3, 4)(torch.zeros(2, 3, dtype=torch.float64)),
     TypeError, "x"),
    ("LSTM cell state on meta", lambda: ScratchLSTMCell(3, 4)(
        torch.zeros(2, 3), (torch.zeros(2, 4, device=META), torch.zeros(2, 4))), ValueError,
     r"state\[0\]"),
    ("beam_search beam_size 0", lambda: beam_search(None, None, None, 1, 0, 5, "cpu"),
     ValueError, "beam_size"),
    # --- models
    ("Transformer src_lengths past the source",
     lambda: TRANSFORMER(ids(2, 5), torch.tensor([6, 5]), ids(2, 3)), ValueError,
     r"src_lengths must hold integers in \[1, 5\]"),
    ("Transformer src_lengths 0", lambda: TRANSFORMER(ids(2, 5), torch.tensor([0, 5]),
                                                      ids(2, 3)), ValueError, "src_lengths"),
    ("Transformer float src_lengths", lambda: TRANSFORMER(ids(2, 5), torch.tensor([2.0, 5.0]),
                                                          ids(2, 3)), TypeError, "src_lengths"),
    ("Transformer src past the vocabulary",
     lambda: TRANSFORMER(torch.tensor([[4, 130]]), None, ids(1, 3)), ValueError,
     r"src must hold ids in \[0, 119\] \(the model's source vocabulary"),
    ("Transformer tgt_in past the vocabulary",
     lambda: TRANSFORMER(ids(1, 5), None, torch.tensor([[1, 120]])), ValueError, "tgt_in"),
    ("Transformer float src", lambda: TRANSFORMER(ids(2, 5).float(), None, ids(2, 3)),
     TypeError, "src"),
    ("Transformer src on meta", lambda: TRANSFORMER(ids(2, 5).to(META), None, ids(2, 3)),
     ValueError, r"src is on meta but the model's parameters are on cpu"),
    ("Transformer greedy max_len 0", lambda: TRANSFORMER.greedy_decode(ids(2, 5), max_len=0),
     ValueError, "max_len"),
    ("Seq2Seq src_lengths past the source",
     lambda: SEQ2SEQ(ids(2, 5), torch.tensor([6, 2]), ids(2, 3)), ValueError, "src_lengths"),
    ("Seq2Seq tgt_in past the vocabulary",
     lambda: SEQ2SEQ(ids(2, 5), None, ids(2, 3, high=40) + 20), ValueError, "tgt_in"),
    ("Bahdanau src past the vocabulary",
     lambda: BAHDANAU(ids(2, 5) + 20, None, ids(2, 3)), ValueError, "src"),
    ("Bahdanau float tgt_in", lambda: BAHDANAU(ids(2, 5), None, ids(2, 3).float()), TypeError,
     "tgt_in"),
    ("Luong src_lengths as floats", lambda: LUONG(ids(2, 5), [2.5, 3.0], ids(2, 3)), TypeError,
     "src_lengths"),
    ("re-encoder src_lengths 0", lambda: REENCODE(ids(2, 5), torch.tensor([0, 5]), ids(2, 3)),
     ValueError, "src_lengths"),
    ("torch Transformer src_lengths past the source",
     lambda: TORCH_TRANSFORMER(ids(2, 5), torch.tensor([9, 5]), ids(2, 3)), ValueError,
     "src_lengths"),
    ("captioner float64 images",
     lambda: CAPTIONER(torch.zeros(2, 3, 8, 8, dtype=torch.float64), ids(2, 3, high=9)),
     TypeError, "images"),
    ("captioner tgt_in past the vocabulary",
     lambda: CAPTIONER(torch.zeros(2, 3, 8, 8), ids(2, 3, high=9) + 9), ValueError, "tgt_in"),
    ("doubly stochastic float step_mask",
     lambda: doubly_stochastic_penalty(torch.zeros(2, 3, 4), torch.ones(2, 3)), TypeError,
     "step_mask"),
    ("pointer labels past the classes",
     lambda: POINTER(torch.zeros(3, 4), torch.zeros(3, 5, 4), torch.full((3, 5), 6)),
     ValueError, "labels"),
    ("pointer query on meta",
     lambda: POINTER(torch.zeros(3, 4, device=META), torch.zeros(3, 5, 4),
                     torch.zeros(3, 5, dtype=torch.long)), ValueError, "query"),
    ("pointer task empty batch index", lambda: pointer_task(n=4).batch([]), ValueError, "index"),
    # --- data
    ("make_batch empty index", lambda: make_batch(PAIRS, [], VOCAB, VOCAB), ValueError,
     "index is empty"),
    ("make_batch index past the pairs", lambda: make_batch(PAIRS, [0, 5], VOCAB, VOCAB),
     IndexError, r"index must hold positions in \[0, 2\)"),
    ("make_batch pair without fr", lambda: make_batch([{"en": "a dog ."}], [0], VOCAB, VOCAB),
     ValueError, r"pairs\[0\] has no 'fr' sentence"),
    ("make_batch pair as a string", lambda: make_batch(["a dog ."], [0], VOCAB, VOCAB),
     TypeError, r"pairs\[0\]"),
    ("BatchIterator pair without en", lambda: BatchIterator([{"fr": "un chien ."}], VOCAB, VOCAB),
     ValueError, r"pairs\[0\] has no 'en'"),
    ("BatchIterator batch_size 0", lambda: BatchIterator(PAIRS, VOCAB, VOCAB, batch_size=0),
     ValueError, "batch_size"),
    ("caption_batch index past the set", lambda: caption_batch(CAPTIONS, VOCAB, [2]),
     IndexError, "index"),
    ("pad a string", lambda: pad("abc"), TypeError, "sequences"),
    ("Vocab.build of one string", lambda: Vocab.build(SENTENCE), TypeError, "sentences"),
    # --- lessons
    ("soft_attention (S,) mask", lambda: soft_attention(
        torch.zeros(2, 4), torch.zeros(2, 3, 4), torch.zeros(2, 3, 4),
        mask=torch.ones(3, dtype=torch.bool)), ValueError, "mask"),
    ("hard_attention integer keys", lambda: hard_attention(
        torch.zeros(2, 4), torch.zeros(2, 3, 4).long(), torch.zeros(2, 3, 4)), TypeError,
     "keys"),
    ("nadaraya_watson (S,) mask", lambda: nadaraya_watson(
        torch.zeros(3), torch.zeros(4), torch.zeros(4), 1.0, mask=torch.ones(4, dtype=torch.bool)),
     ValueError, r"mask\[None\]"),
    ("nadaraya_watson string bandwidth",
     lambda: nadaraya_watson(torch.zeros(3), torch.zeros(4), torch.zeros(4), "1"), TypeError,
     "bandwidth"),
    ("answer_questions of one string",
     lambda: answer_questions("where does alice live?", make_document(n_people=1)), TypeError,
     "questions"),
    ("word_at negative distance", lambda: word_at(PAIRS[0], -1), ValueError,
     "distance_from_end"),
    ("word_at pair without en", lambda: word_at({"fr": "le chat ."}, 0), ValueError, "pair"),
    ("grid_attention integer query", lambda: grid_attention(
        torch.zeros(2, 4, dtype=torch.long), torch.zeros(2, 3, 4)), TypeError, "query"),
    # --- the checks themselves
    ("check_tensor of a list", lambda: check_tensor("x", [1.0]), TypeError, "x"),
    ("check_lengths of a bool", lambda: check_lengths("n", [True], 3), TypeError, "n"),
    ("check_token_ids negative", lambda: check_token_ids("ids", torch.tensor([-1]), 3),
     ValueError, "ids"),
    ("check_index of a str", lambda: check_index("i", "0", 3), TypeError, "i"),
    ("check_sentences of a dict", lambda: check_sentences("s", {"a": 1}), TypeError, "s"),
    ("check_mask of lower rank", lambda: check_mask("m", torch.ones(3, dtype=torch.bool),
                                                    (2, 3)), ValueError, r"m\[None\]"),
    ("check_qkv of a list query", lambda: check_qkv([1.0], *qkv()[1:]), TypeError,
     "query must be a torch.Tensor, got list"),
    ("check_qkv integer key", lambda: check_qkv(qkv()[0], qkv()[1].long(), qkv()[2]),
     TypeError, "key must be a floating-point tensor, got torch.int64"),
    ("check_qkv float64 value", lambda: check_qkv(*qkv()[:2], qkv()[2].double()), TypeError,
     "value has dtype torch.float64 but query has torch.float32"),
    ("check_qkv value on meta", lambda: check_qkv(*qkv()[:2], qkv()[2].to(META)), ValueError,
     "value is on meta but query is on cpu"),
    ("check_qkv key of another width", lambda: check_qkv(qkv()[0], qkv(dim=6)[1], qkv()[2]),
     ValueError, r"key \(\.\.\., S, d_k\).*got query \(2, 2, 3, 8\), key \(2, 2, 4, 6\)"),
    ("check_qkv value of another length", lambda: check_qkv(*qkv()[:2], qkv(keys=5)[2]),
     ValueError, r"value \(\.\.\., S, d_v\).*value \(2, 2, 5, 8\)"),
    ("check_qkv other leading dimensions", lambda: check_qkv(qkv()[0], *qkv(heads=3)[1:]),
     ValueError, r"the same leading dimensions.*key \(2, 3, 4, 8\)"),
    ("check_qkv (T, S) mask", lambda: check_qkv(*qkv(), torch.ones(3, 4, dtype=torch.bool)),
     ValueError, r"mask must have shape \(\.\.\., T, S\) = \(2, 2, 3, 4\).*mask\[None, None\]"),
    ("check_qkv float mask", lambda: check_qkv(*qkv(), torch.ones(1, 1, 3, 4)), TypeError,
     "mask must be a torch.bool tensor"),
]


@pytest.mark.parametrize(("call", "error", "pattern"), [case[1:] for case in BAD_CALLS],
                         ids=[case[0] for case in BAD_CALLS])
def test_bad_input_raises_an_error_that_names_the_argument(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


def test_the_table_is_large_and_its_ids_unique():
    assert len(BAD_CALLS) >= 60
    assert len({case[0] for case in BAD_CALLS}) == len(BAD_CALLS)


def test_ranges_are_value_errors_and_index_errors():
    """Out-of-range ids and indices raise an error that is both, so ``except IndexError``
    around a lookup and ``pytest.raises(ValueError)`` both catch it."""
    with pytest.raises(ValueError):
        one_hot(torch.tensor([5]), 5)
    with pytest.raises(IndexError):
        padding_mask([5], 3)


# --- good input still works ------------------------------------------------------------------


def test_size_one_dimensions_broadcast():
    scores = torch.randn(2, 3, 4)
    key_mask = torch.tensor([[True] * 4, [True, True, False, False]])
    weights = masked_softmax(scores, key_mask[:, None, :])  # (B, 1, S)
    assert bool((weights[1, :, 2:] == 0).all())
    causal = causal_mask(3, 4)[None]  # (1, T, S)
    torch.testing.assert_close(masked_softmax(scores, causal),
                               masked_softmax(scores, causal.expand(2, 3, 4)))
    q, k, v = qkv(queries=3, keys=3)
    output, _ = scaled_dot_product_attention(q, k, v, causal_mask(3)[None, None])
    torch.testing.assert_close(output, fused_attention(q, k, v, causal=True))
    x = torch.randn(2, 3, 8)
    torch.testing.assert_close(MHA(x, attn_mask=causal_mask(3)[None])[0], MHA(x, causal=True)[0])


def test_lists_of_lengths_and_sentences_are_accepted():
    assert padding_mask([3, 0], 3).tolist() == [[True] * 3, [False] * 3]
    assert padding_mask(torch.tensor([1, 3]), 3).sum().item() == 4
    assert bleu([SENTENCE], [SENTENCE]) == pytest.approx(100.0)
    assert bleu([SENTENCE.split()], [SENTENCE]) == pytest.approx(100.0)
    assert bleu_by_length([SENTENCE], [SENTENCE], [7])["1-10"] == pytest.approx(100.0)
    assert make_batch(PAIRS, range(2), VOCAB, VOCAB).src.shape[0] == 2
    assert make_batch(PAIRS, torch.tensor([1]), VOCAB, VOCAB).index == [1]
    assert causal_mask(0).shape == (0, 0)


def test_autocast_may_mix_dtypes():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        output, _ = MHA(torch.randn(2, 3, 8, dtype=torch.bfloat16))
    assert output.shape == (2, 3, 8)


# --- no NaN for finite input -------------------------------------------------------------------

SEEDS = range(4)


def _random_mask(generator, shape, empty_row=True):
    mask = torch.rand(shape, generator=generator) > 0.5
    if empty_row:
        mask[(0,) * (len(shape) - 1)] = False  # one row with nothing to attend to
    return mask


def _padded(generator, batch=3, length=6, high=20):
    lengths = torch.randint(1, length + 1, (batch,), generator=generator)
    lengths[0] = length
    src = torch.randint(4, high, (batch, length), generator=generator)
    src[torch.arange(length)[None, :] >= lengths[:, None]] = PAD_ID
    return src, lengths


def _softmaxes(g, scale):
    scores = torch.randn(3, 4, 5, generator=g) * scale
    mask = _random_mask(g, (3, 4, 5))
    return [masked_softmax(scores, mask), masked_softmax(scores),
            softmax_with_temperature(scores, 0.05), softmax_with_temperature(scores, 20.0),
            entropy(torch.softmax(scores, -1)), entropy(masked_softmax(scores, mask)),
            local_attention(scores[:, 0], torch.rand(3, generator=g) * 4, 1, mask[:, 0],
                            gaussian=True)]


def _attention(g, scale):
    q, k, v = (x * scale for x in qkv(batch=3, heads=2, queries=4, keys=5))
    padding = _random_mask(g, (3, 5))[:, None, None, :]
    causal = causal_mask(4, 5)[None, None]
    outputs = [*scaled_dot_product_attention(q, k, v, padding & causal),
               fused_attention(q, k, v, padding), blockwise_attention(q, k, v, block_size=2),
               cosine_similarity(q, torch.zeros_like(q)), cosine_similarity(q, k[..., :4, :])]
    mha = MultiHeadAttention(8, 2, implementation="explicit")
    x = torch.randn(3, 4, 8, generator=g) * scale
    key_mask = _random_mask(g, (3, 4))
    outputs += [*mha(x, key_mask=key_mask, causal=True, need_weights=True),
                MHA(x, key_mask=key_mask)[0]]
    return outputs


def _models(g, scale):
    src, lengths = _padded(g)
    tgt = torch.randint(4, 20, (3, 4), generator=g)
    outputs = [TRANSFORMER(src, lengths, tgt), TRANSFORMER(src, None, tgt),
               SEQ2SEQ(src, lengths, tgt), REENCODE(src, lengths, tgt),
               *BAHDANAU(src, lengths, tgt), *LUONG(src, lengths, tgt)]
    images = torch.rand(3, 3, 8, 8, generator=g) * scale
    outputs += list(CAPTIONER(images, torch.randint(4, 9, (3, 4), generator=g)))
    task = pointer_task(n=3, n_items=5, dim=4, n_classes=6, seed=int(g.initial_seed()))
    outputs += [POINTER(task.query * scale, task.keys, task.labels).logits]
    return outputs


@pytest.mark.parametrize("family", [_softmaxes, _attention, _models], ids=lambda f: f.__name__)
@pytest.mark.parametrize("scale", [1.0, 30.0])
@pytest.mark.parametrize("seed", SEEDS)
def test_no_public_function_returns_nan_for_finite_input(family, scale, seed):
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    with torch.no_grad():
        outputs = family(g, scale)
    for position, output in enumerate(outputs):
        assert not output.isnan().any(), f"{family.__name__} output {position} has NaN"


@pytest.mark.parametrize("scale", [1e4, 1e30])
def test_softmaxes_survive_huge_finite_scores(scale):
    g = torch.Generator().manual_seed(0)
    for output in _softmaxes(g, scale):
        assert not output.isnan().any()
        assert math.isfinite(float(output.sum()))
