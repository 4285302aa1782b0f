"""The Transformer: blocks against PyTorch's, masks, decoding with and without the KV cache,
beam search, the loss and the schedule, and a learning test."""

import pytest
import torch
from torch import nn

from course_lib.data.sequence_tasks import exact_match, sequence_task
from course_lib.data.vocab import BOS_ID, EOS_ID, PAD_ID
from course_lib.models import count_parameters, parameters_by_part
from course_lib.models.transformer import (
    AttentionMaps,
    DecoderBlock,
    EncoderBlock,
    ResidualSublayer,
    Transformer,
    TransformerConfig,
    label_smoothed_loss,
    transformer_loss,
)
from course_lib.nn import decoding
from course_lib.nn.self_attention import MultiHeadAttention
from course_lib.train.schedules import transformer_lr, warmup_inverse_sqrt

from .strict_device import stray_tensors_fail

ATOL = 1e-5


def small_config(**changes):
    settings = dict(src_vocab_size=14, tgt_vocab_size=16, d_model=16, num_heads=4,
                    num_encoder_layers=2, num_decoder_layers=2, d_ff=32, dropout=0.0,
                    max_len=40)
    return TransformerConfig(**{**settings, **changes})


def small_model(seed=0, **changes):
    torch.manual_seed(seed)
    return Transformer(small_config(**changes)).eval()


def source_batch(seed=1):
    """Two sentences, the second padded: (2, 7) ids and lengths."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 14, (2, 7), generator=g)
    src[1, 5:] = PAD_ID
    return src, torch.tensor([7, 5])


def copy_weights(ours: nn.Module, theirs: nn.Module, pairs: dict[str, str]) -> None:
    """Copy ``theirs``' parameter named ``value`` into ours named ``key``; MultiheadAttention
    modules through :meth:`MultiHeadAttention.from_torch`."""
    with torch.no_grad():
        for name, module in ours.named_children():
            if isinstance(module, MultiHeadAttention):
                torch_name = {"cross_attn": "multihead_attn"}.get(name, name)
                copied = MultiHeadAttention.from_torch(getattr(theirs, torch_name))
                module.load_state_dict(copied.state_dict())
        for our_name, torch_name in pairs.items():
            ours.get_parameter(our_name).copy_(theirs.get_parameter(torch_name))


FFN = {f"ffn.linear{i}.{p}": f"linear{i}.{p}" for i in (1, 2) for p in ("weight", "bias")}


def norms(names):
    return {f"{ours}.norm.{p}": f"{theirs}.{p}" for ours, theirs in names.items()
            for p in ("weight", "bias")}


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_block_matches_torch(norm_first):
    torch.manual_seed(0)
    theirs = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True,
                                        norm_first=norm_first).eval()
    ours = EncoderBlock(small_config(norm_first=norm_first)).eval()
    copy_weights(ours, theirs, {**FFN, **norms({"attn_sublayer": "norm1",
                                                "ffn_sublayer": "norm2"})})
    x = torch.randn(2, 7, 16)
    key_mask = torch.tensor([[True] * 7, [True] * 5 + [False] * 2])
    out = ours(x, key_mask)
    ref = theirs(x, src_key_padding_mask=~key_mask)
    # PyTorch's fast path leaves padded positions as zeros; compare the real ones.
    torch.testing.assert_close(out[key_mask], ref[key_mask], atol=ATOL, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_block_matches_torch(norm_first):
    torch.manual_seed(0)
    theirs = nn.TransformerDecoderLayer(16, 4, 32, dropout=0.0, batch_first=True,
                                        norm_first=norm_first).eval()
    ours = DecoderBlock(small_config(norm_first=norm_first)).eval()
    copy_weights(ours, theirs, {**FFN, **norms({"self_sublayer": "norm1",
                                                "cross_sublayer": "norm2",
                                                "ffn_sublayer": "norm3"})})
    y, memory = torch.randn(2, 6, 16), torch.randn(2, 7, 16)
    memory_mask = torch.tensor([[True] * 7, [True] * 5 + [False] * 2])
    out = ours(y, memory, memory_mask)
    ref = theirs(y, memory, tgt_mask=nn.Transformer.generate_square_subsequent_mask(6),
                 memory_key_padding_mask=~memory_mask)
    torch.testing.assert_close(out, ref, atol=ATOL, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_residual_sublayer_is_its_equation(norm_first):
    """Post-norm ``LN(x + drop(f(x)))``, pre-norm ``x + drop(f(LN(x)))``, written out with
    the layer's own LayerNorm weights and a dropout mask drawn from the same seed."""
    torch.manual_seed(0)
    sublayer = ResidualSublayer(8, dropout=0.5, norm_first=norm_first).train()
    with torch.no_grad():  # LayerNorm starts as the identity map's scale: make it not
        sublayer.norm.weight.normal_(1.0, 0.3)
        sublayer.norm.bias.normal_(0.0, 0.3)
    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(1))
    f = torch.nn.Linear(8, 8)

    def layer_norm(t):  # LN(t) = γ ⊙ (t − μ) / √(σ² + ε) + β over the last dimension
        mean, var = t.mean(-1, keepdim=True), t.var(-1, unbiased=False, keepdim=True)
        return sublayer.norm.weight * (t - mean) / torch.sqrt(var + 1e-5) + sublayer.norm.bias

    torch.manual_seed(2)
    out = sublayer(x, f)
    torch.manual_seed(2)
    keep = torch.nn.functional.dropout(torch.ones(2, 5, 8), 0.5)  # 0 or 1 / (1 - p) = 2
    by_hand = x + keep * f(layer_norm(x)) if norm_first else layer_norm(x + keep * f(x))
    torch.testing.assert_close(out, by_hand, atol=ATOL, rtol=1e-5)
    other = x + keep * f(layer_norm(x)) if not norm_first else layer_norm(x + keep * f(x))
    assert (out - other).abs().max() > 0.1  # the two placements differ: the check can fail


def test_blocks_record_the_weights_they_make_in_the_maps_passed_in():
    torch.manual_seed(0)
    encoder, decoder = EncoderBlock(small_config()).eval(), DecoderBlock(small_config()).eval()
    x, y = torch.randn(2, 7, 16), torch.randn(2, 6, 16)
    key_mask = torch.tensor([[True] * 7, [True] * 5 + [False] * 2])
    maps = AttentionMaps()
    encoded = encoder(x, key_mask, maps)
    decoded = decoder(y, encoded, key_mask, maps)
    torch.testing.assert_close(encoded, encoder(x, key_mask))  # recording changes no output
    torch.testing.assert_close(decoded, decoder(y, encoded, key_mask))
    _, expected = encoder.self_attn(x, key_mask=key_mask, need_weights=True)
    torch.testing.assert_close(maps.encoder[0], expected)  # post-norm: x enters the attention
    assert [m.shape for m in (*maps.encoder, *maps.decoder, *maps.cross)] == \
        [(2, 4, 7, 7), (2, 4, 6, 6), (2, 4, 6, 7)]
    assert bool((maps.cross[0][1, :, :, 5:] == 0).all())


def test_encoder_without_positions_is_permutation_equivariant():
    """Without positional encodings, shuffling the words shuffles the outputs the same way: the
    encoder cannot tell word order."""
    torch.manual_seed(0)
    block = EncoderBlock(small_config()).eval()
    x = torch.randn(2, 7, 16)
    permutation = torch.tensor([6, 2, 0, 5, 1, 3, 4])
    out = block(x)
    shuffled = block(x[:, permutation])
    torch.testing.assert_close(shuffled, out[:, permutation], atol=ATOL, rtol=1e-5)


def test_base_configuration_is_the_papers():
    config = TransformerConfig.base(37_000, 37_000)
    model = Transformer(config)
    D, F, N, V = 512, 2048, 6, 37_000
    attention = 4 * (D * D + D)
    ffn = D * F + F + F * D + D
    expected = (N * (attention + ffn + 2 * 2 * D)  # encoder layers, two LayerNorms each
                + N * (2 * attention + ffn + 3 * 2 * D)  # decoder layers
                + 2 * V * D + V)  # two embeddings; the output layer shares one, adds a bias
    assert (config.d_model, config.num_heads, config.d_ff, config.num_encoder_layers,
            config.num_decoder_layers, config.dropout, config.norm_first) == \
        (512, 8, 2048, 6, 6, 0.1, False)
    assert sum(p.numel() for p in model.parameters()) == expected
    assert count_parameters(model) == expected
    parts = parameters_by_part(model)
    assert sum(parts.values()) == expected  # the tied output weight counts once
    assert parts["src_embed"] == parts["tgt_embed"] == V * D
    assert parts["encoder_layers"] == N * (attention + ffn + 2 * 2 * D)
    assert parts["decoder_layers"] == N * (2 * attention + ffn + 3 * 2 * D)


def test_padding_never_changes_a_sentence_output():
    model = small_model()
    src, lengths = source_batch()
    tgt_in = torch.tensor([[BOS_ID, 5, 6, 7], [BOS_ID, 8, 9, 10]])
    batched = model(src, lengths, tgt_in)
    alone = model(src[1:, :5], lengths[1:], tgt_in[1:])
    torch.testing.assert_close(batched[1:], alone, atol=ATOL, rtol=1e-5)
    # PAD ids alone mark padding when no lengths are given.
    torch.testing.assert_close(model(src, None, tgt_in), batched)


def test_no_future_leakage_in_the_decoder():
    model = small_model()
    src, lengths = source_batch()
    tgt_in = torch.randint(4, 16, (2, 8), generator=torch.Generator().manual_seed(2))
    before = model(src, lengths, tgt_in)
    changed = tgt_in.clone()
    changed[:, 5] = (changed[:, 5] + 1 - 4) % 12 + 4
    after = model(src, lengths, changed)
    torch.testing.assert_close(after[:, :5], before[:, :5], atol=0, rtol=0)
    assert not torch.allclose(after[:, 5:], before[:, 5:])


@pytest.mark.parametrize("changes", [{}, {"norm_first": True, "positions": "learned"},
                                     {"attention": "explicit"}])
def test_kv_cache_decoding_equals_full_recomputation(changes):
    model = small_model(**changes)
    src, lengths = source_batch()
    memory = model.encode(src, lengths)
    prefix = torch.randint(4, 16, (2, 9), generator=torch.Generator().manual_seed(3))
    full = model.decode(prefix, memory)  # (2, 9, V)
    cache = model.new_cache()
    steps = [model.decode(prefix[:, t:t + 1], memory, cache) for t in range(9)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=ATOL, rtol=1e-5)
    assert cache.length == 9
    cached = model.greedy_decode(src, lengths, max_len=12)
    recomputed = model.greedy_decode(src, lengths, max_len=12, use_cache=False)
    assert torch.equal(cached, recomputed)


def test_greedy_decoding_agrees_with_teacher_forcing_on_its_own_output():
    model = small_model()
    src, lengths = source_batch()
    generated = model.greedy_decode(src, lengths, max_len=10)
    tgt_in = torch.cat([torch.full((2, 1), BOS_ID), generated[:, :-1]], dim=1)
    forced = model(src, lengths, tgt_in).argmax(-1)
    alive = torch.cat([torch.ones(2, 1, dtype=torch.bool),
                       (generated[:, :-1] != EOS_ID) & (generated[:, :-1] != PAD_ID)],
                      dim=1).cumprod(1).bool()
    assert torch.equal(forced[alive], generated[alive])
    assert bool((generated[~alive] == PAD_ID).all())


def test_beam_of_one_is_greedy_and_a_wide_beam_scores_at_least_as_well():
    model = small_model(seed=4)
    src, lengths = source_batch()
    greedy = model.greedy_decode(src, lengths, max_len=10)
    beam = model.beam_search(src, lengths, beam_size=1, max_len=10)
    assert torch.equal(beam[:, :greedy.shape[1]], greedy)

    def log_prob(tokens):
        tgt_in = torch.cat([torch.full((2, 1), BOS_ID), tokens[:, :-1]], dim=1)
        logp = torch.log_softmax(model(src, lengths, tgt_in), -1)
        picked = logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
        return picked.masked_fill(tokens == PAD_ID, 0).sum(-1)

    wide = model.beam_search(src, lengths, beam_size=6, max_len=10)
    finished = (wide == EOS_ID).any(-1) & (greedy == EOS_ID).any(-1)
    assert bool((log_prob(wide)[finished] >= log_prob(greedy)[finished] - 1e-5).all())


def test_beam_search_stops_early_with_the_same_answer(monkeypatch):
    """With α = 0 the search may stop once no live hypothesis can overtake the best finished
    one; searching on to max_len must give the same outputs."""
    model = small_model(seed=4)
    src, lengths = source_batch()
    calls = []
    decode = model._decode
    monkeypatch.setattr(model, "_decode", lambda *a, **k: calls.append(1) or decode(*a, **k))
    early = model.beam_search(src, lengths, beam_size=4, max_len=30)
    early_steps = len(calls)
    monkeypatch.setattr(decoding, "_settled", lambda scores, finished: False)
    full = model.beam_search(src, lengths, beam_size=4, max_len=30)
    assert early_steps < len(calls) - 1  # it did stop early here
    assert torch.equal(early, full[:, :early.shape[1]])
    assert bool((full[:, early.shape[1]:] == PAD_ID).all())


def test_label_smoothed_loss_is_pytorchs():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 11, generator=g)
    targets = torch.randint(4, 11, (3, 5), generator=g)
    targets[1, 3:] = PAD_ID
    for smoothing in (0.0, 0.1, 0.3):
        expected = nn.functional.cross_entropy(logits.reshape(-1, 11), targets.reshape(-1),
                                               ignore_index=PAD_ID, label_smoothing=smoothing)
        torch.testing.assert_close(label_smoothed_loss(logits, targets, smoothing), expected)
    with pytest.raises(ValueError, match="smoothing"):
        label_smoothed_loss(logits, targets, 1.0)
    with pytest.raises(ValueError, match=r"\(B, T, V\)"):
        label_smoothed_loss(logits[:, :4], targets)


def test_warmup_schedule_is_the_papers_scaled_to_the_base_rate():
    weight = nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([weight], lr=2.0)
    schedule = warmup_inverse_sqrt(optimizer, warmup_steps=10)
    rates = []
    for _ in range(40):
        rates.append(optimizer.param_groups[0]["lr"])  # the rate of the next step
        optimizer.step()
        schedule.step()
    expected = [2.0 * transformer_lr(s, 512, 10) / transformer_lr(10, 512, 10)
                for s in range(1, 41)]
    assert rates == pytest.approx(expected)
    assert max(rates) == pytest.approx(2.0) and rates.index(max(rates)) == 9
    assert transformer_lr(4000, 512, 4000) == pytest.approx((512 * 4000) ** -0.5)
    with pytest.raises(ValueError, match="warmup_steps"):
        warmup_inverse_sqrt(optimizer, 0)


def test_training_and_decoding_make_every_tensor_on_the_inputs_device():
    model = small_model(dropout=0.1)
    batch = sequence_task("copy", n=4, n_symbols=10, max_len=5, seed=0)
    with stray_tensors_fail():
        model.train()
        transformer_loss(0.1)(model, batch).backward()
        model.eval()
        outputs = [model.greedy_decode(batch.src, batch.src_lengths, max_len=6),
                   model.greedy_decode(batch.src, None, max_len=6, use_cache=False),
                   model.beam_search(batch.src, batch.src_lengths, beam_size=3, max_len=6)]
        maps = model.attention_maps(batch.src, batch.src_lengths, batch.tgt_in)
    assert all(out.device.type == "cpu" for out in outputs)
    assert all(p.grad is not None and p.grad.device.type == "cpu" for p in model.parameters())
    assert len(maps.encoder) == len(maps.decoder) == len(maps.cross) == 2


def test_attention_maps_have_one_map_per_layer_and_head():
    model = small_model()
    src, lengths = source_batch()
    tgt_in = torch.randint(4, 16, (2, 6))
    maps = model.attention_maps(src, lengths, tgt_in)
    assert [m.shape for m in maps.encoder] == [(2, 4, 7, 7)] * 2
    assert [m.shape for m in maps.decoder] == [(2, 4, 6, 6)] * 2
    assert [m.shape for m in maps.cross] == [(2, 4, 6, 7)] * 2
    for m in (*maps.encoder, *maps.decoder, *maps.cross):
        torch.testing.assert_close(m.sum(-1), torch.ones(m.shape[:-1]))
    assert bool((maps.cross[0][1, :, :, 5:] == 0).all())  # padding gets no weight
    assert bool((maps.decoder[1].triu(diagonal=1) == 0).all())  # nor the future


def test_config_and_inputs_are_checked():
    with pytest.raises(ValueError, match="multiple of num_heads"):
        small_config(num_heads=5)
    with pytest.raises(ValueError, match="positions"):
        small_config(positions="rotary")
    with pytest.raises(ValueError, match="dropout"):
        small_config(dropout=1.0)
    model = small_model()
    with pytest.raises(ValueError, match=r"src must have shape \(B, S\)"):
        model.encode(torch.zeros(2, 3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"src_lengths must have shape \(2,\)"):
        model.encode(torch.ones(2, 3, dtype=torch.long), torch.tensor([3]))
    with pytest.raises(ValueError, match="beyond max_len = 40"):
        model(torch.ones(1, 41, dtype=torch.long), None, torch.ones(1, 2, dtype=torch.long))


@pytest.mark.parametrize("norm_first", [False, True])
def test_the_model_learns_to_copy_exactly(norm_first):
    """A learning test: held-out sequences, decoded greedily with the cache, all exactly right."""
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(14, 14, d_model=32, num_heads=4, num_encoder_layers=2,
                                          num_decoder_layers=2, d_ff=64, dropout=0.0,
                                          norm_first=norm_first, max_len=16))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98))
    schedule = warmup_inverse_sqrt(optimizer, 50)
    held_out = sequence_task("copy", n=200, min_len=3, max_len=8, seed=10_000)
    score = 0.0
    for step in range(1500):
        model.train()
        loss = transformer_loss(0.0)(model, sequence_task("copy", n=64, min_len=3, max_len=8,
                                                          seed=step))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        if step % 100 == 99:
            model.eval()
            score = exact_match(model.greedy_decode(held_out.src, held_out.src_lengths, 10),
                                held_out.tgt_out)
            if score == 1.0:
                break
    assert score == 1.0, f"{score:.3f} of held-out copies exactly right"
