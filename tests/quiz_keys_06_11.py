"""The keys of the computed self-check questions of lessons 06 to 11, recomputed with course_lib:
each function builds the small example its question's prompt describes."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from course_lib.data.vocab import BOS_ID, PAD_ID
from course_lib.lessons.estimators import expected_loss, gradient_samples
from course_lib.models import count_parameters, parameters_by_part
from course_lib.models.captioner import (
    CaptionerConfig,
    CNNEncoder,
    ShowAttendTell,
    doubly_stochastic_penalty,
)
from course_lib.models.pointer import PointerConfig, PointerNet, pointer_task
from course_lib.models.transformer import (
    EncoderBlock,
    Transformer,
    TransformerConfig,
    label_smoothed_loss,
)
from course_lib.nn.decoding import length_normalised
from course_lib.nn.efficient import reach, window_mask
from course_lib.nn.positions import LearnedPositions, sinusoidal_table
from course_lib.nn.self_attention import (
    MultiHeadAttention,
    causal_mask,
    scaled_dot_product_attention,
)
from course_lib.seeding import make_generator
from course_lib.train.schedules import transformer_lr

# ---------------------------------------------------------------------------------------------
# 06 · Hard attention


def _no_gradient_parameters() -> list[str]:
    torch.manual_seed(0)
    model = PointerNet(PointerConfig(estimator="reinforce")).train()
    batch = pointer_task(n=8, seed=1)
    output = model(batch.query, batch.keys, batch.labels, make_generator(0))
    nn.functional.cross_entropy(output.logits, batch.target).backward()
    return sorted(name for name, p in model.named_parameters() if p.grad is None)


def _every_choice_logits_shape() -> list[int]:
    # expected_loss computes model.out(model.values(task.labels)): the answer for every item
    torch.manual_seed(0)
    model = PointerNet(PointerConfig(n_classes=16))
    task = pointer_task(n=4, n_items=8, n_classes=16, seed=0)
    expected_loss(model, task)  # runs on this task, so the shapes below are the ones it uses
    return list(model.out(model.values(task.labels)).shape)


def _gradient_samples_shape() -> list[int]:
    torch.manual_seed(0)
    model = PointerNet(PointerConfig(dim=16))
    task = pointer_task(n=32, dim=16, seed=7)
    return list(gradient_samples(model, task, "reinforce", n_samples=10, seed=1).shape)


# ---------------------------------------------------------------------------------------------
# 07 · Captioning


def _encoder_features_shape() -> list[int]:
    torch.manual_seed(0)
    encoder = CNNEncoder(CaptionerConfig(20, channels=(32, 64), pool_after=(0, 1), coords=True,
                                         read_convs=1)).eval()
    with torch.no_grad():
        return list(encoder(torch.zeros(4, 1, 32, 128)).shape)


def _key_size() -> int:
    model = ShowAttendTell(CaptionerConfig(20, channels=(32, 64), pool_after=(0, 1), coords=True,
                                           read_convs=1, hidden_size=32, embed_dim=16,
                                           attention_size=16))
    return model.decoder.key_size


def _location_index() -> int:
    # the cell in row 3, column 5 of a 64×64 scene's 16×16 grid, found by its coordinates
    encoder = CNNEncoder(CaptionerConfig(20, in_channels=3, channels=(8, 16), pool_after=(0, 1),
                                         coords=True)).eval()
    with torch.no_grad():
        features = encoder(torch.zeros(1, 3, 64, 64))  # (1, L, C)
    rows, cols = encoder.grid_shape(64, 64)
    xy = features[0, :, encoder.key_size - 2:encoder.key_size]  # (L, 2): each cell's x and y
    x, y = torch.linspace(-1, 1, cols)[5], torch.linspace(-1, 1, rows)[3]
    (index,) = ((xy[:, 0] == x) & (xy[:, 1] == y)).nonzero()[:, 0].tolist()
    return index


def _penalty_floor() -> float:
    steps, locations = 5, 256
    uniform = torch.full((1, steps, locations), 1 / locations)
    return doubly_stochastic_penalty(uniform, torch.ones(1, steps, dtype=torch.bool)).item()


def _caption_weights_shape() -> list[int]:
    torch.manual_seed(0)
    model = ShowAttendTell(CaptionerConfig(20, channels=(8, 16), hidden_size=32, embed_dim=16,
                                           attention_size=16, read_convs=1)).eval()
    tgt_in = torch.randint(4, 20, (3, 6), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        return list(model(torch.zeros(3, 1, 32, 128), tgt_in).weights.shape)


# ---------------------------------------------------------------------------------------------
# 08 · Self-attention


def _attention_output_shape() -> list[int]:
    g = torch.Generator().manual_seed(0)
    query = torch.randn(2, 4, 8, generator=g)
    key = torch.randn(2, 7, 8, generator=g)
    value = torch.randn(2, 7, 5, generator=g)
    output, _ = scaled_dot_product_attention(query, key, value)
    return list(output.shape)


def _learned_position_parameters() -> int:
    return count_parameters(LearnedPositions(64, max_len=128), trainable_only=True)


def _position_norm() -> float:
    return sinusoidal_table(64, 64)[37].double().pow(2).sum().item()


def _position_dot() -> float:
    table = sinusoidal_table(8, 4)  # D = 4: ω_0 = 1, ω_1 = 0.01
    return (table[3] @ table[5]).item()


# ---------------------------------------------------------------------------------------------
# 09 · Multi-head attention


def _heads_shape() -> list[int]:
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4)
    with torch.no_grad():
        return list(mha.split_heads(mha.q_proj(torch.randn(2, 5, 16))).shape)


def _cross_weights_shape() -> list[int]:
    torch.manual_seed(0)
    mha = MultiHeadAttention(24, 6)
    with torch.no_grad():
        _, weights = mha(torch.randn(2, 4, 24), torch.randn(2, 7, 24), need_weights=True)
    return list(weights.shape)


def _layer_parameters() -> int:
    return count_parameters(MultiHeadAttention(24, 6))


def _combined_mask_shape() -> list[int]:
    key_mask = torch.arange(5) < torch.tensor([5, 3])[:, None]  # (B, S) = (2, 5)
    return list((key_mask[:, None, None, :] & causal_mask(5, 5)).shape)


def _bottom_right_count() -> int:
    return int(causal_mask(3, 7).sum())


def _changed_outputs() -> int:
    torch.manual_seed(4)
    layer = MultiHeadAttention(12, 3, implementation="explicit").eval()
    original = torch.randn(1, 10, 12)
    edited = original.clone()
    edited[:, 6] = torch.randn(12)
    with torch.no_grad():
        change = (layer(edited, causal=True)[0] - layer(original, causal=True)[0]).abs()
    return int((change.amax(dim=-1) > 0).sum())


def _weights_mebibytes() -> float:
    q, k, v = (torch.randn(1, 4, 1024, 32) for _ in range(3))
    _, weights = scaled_dot_product_attention(q, k, v)
    return weights.numel() * weights.element_size() / 2**20


# ---------------------------------------------------------------------------------------------
# 10 · The Transformer


def _scaled_embedding_std() -> float:
    torch.manual_seed(0)
    d_model = 256
    model = Transformer(TransformerConfig(2000, 2000, d_model=d_model, num_heads=4,
                                          num_encoder_layers=0, num_decoder_layers=0, d_ff=16))
    rows = [i for i in range(2000) if i != PAD_ID]
    return (model.src_embed.weight[rows] * math.sqrt(d_model)).std().item()


def _encoder_block_parameters() -> int:
    config = TransformerConfig(20, 20, d_model=32, num_heads=4, d_ff=64, dropout=0.0)
    return count_parameters(EncoderBlock(config))


def _tied_output_parameters() -> int:
    model = Transformer(TransformerConfig(800, 1000, d_model=64, num_heads=4,
                                          num_encoder_layers=1, num_decoder_layers=1, d_ff=128))
    return parameters_by_part(model)["out"]


def _post_norm_size() -> float:
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(50, 50, d_model=64, num_heads=4, num_encoder_layers=12,
                                          num_decoder_layers=1, d_ff=256, dropout=0.0,
                                          norm_first=False)).eval()
    src = torch.randint(4, 50, (8, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        x = model.embed_source(src)
        for block in model.encoder_layers:
            x = block(x)
    return x.norm(dim=-1).mean().item()


def _smoothed_target() -> float:
    # at all-zero logits p = 1/V, and the gradient of the loss is p − p*: p*_y = 1/V − grad_y
    vocabulary, reference = 10, 6
    logits = torch.zeros(1, 1, vocabulary, requires_grad=True)
    label_smoothed_loss(logits, torch.tensor([[reference]]), 0.1).backward()
    return 1 / vocabulary - logits.grad[0, 0, reference].item()


def _decay_ratio() -> float:
    return transformer_lr(16_000, 512, 4000) / transformer_lr(4000, 512, 4000)


# ---------------------------------------------------------------------------------------------
# 11 · Efficient attention


def _decode_steps(steps: int):
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(20, 20, d_model=32, num_heads=4, num_encoder_layers=1,
                                          num_decoder_layers=2, d_ff=64, dropout=0.0)).eval()
    src = torch.randint(4, 20, (2, 7), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        memory = model.encode(src)
        cache = model.new_cache()
        prefix = torch.full((2, 1), BOS_ID)
        for _ in range(steps):
            logits = model.decode(prefix[:, -1:], memory, cache)[:, -1]
            prefix = torch.cat([prefix, logits.argmax(-1, keepdim=True)], dim=1)
    return cache


def _self_cache_shape() -> list[int]:
    return list(_decode_steps(5).layers[0][0].k.shape)


def _self_cache_numbers() -> int:
    cache = _decode_steps(4)
    return sum(self_cache.k.numel() + self_cache.v.numel() for self_cache, _ in cache.layers)


def _length_penalty_winners() -> list[str]:
    scores, lengths = torch.tensor([-3.0, -3.6]), torch.tensor([3, 9])  # A, B
    return ["AB"[int(length_normalised(scores, lengths, alpha).argmax())] for alpha in (0.0, 1.0)]


def _window_count() -> int:
    return int(window_mask(16, 16, 3, causal=True).sum())


def _buffer_size() -> int:
    return int(window_mask(20, 20, 6, causal=True).sum(dim=-1).max())


def _receptive_field() -> int:
    return int(reach(window_mask(12, 12, 3, causal=True), 5)[-1].sum()) - 1


def _isolated(compute: Callable[[], object]) -> Callable[[], object]:
    """``compute`` run without touching the caller's random state (several functions seed)."""

    def run() -> object:
        with torch.random.fork_rng(devices=[]):
            return compute()

    run.__name__ = run.__qualname__ = compute.__name__
    return run


_KEYS: dict[str, Callable[[], object]] = {
    "06.no-gradient-path": _no_gradient_parameters,
    "06.every-choice-logits": _every_choice_logits_shape,
    "06.gradient-samples-shape": _gradient_samples_shape,
    "07.encoder-features": _encoder_features_shape,
    "07.key-size": _key_size,
    "07.location-index": _location_index,
    "07.penalty-floor": _penalty_floor,
    "07.weights-shape": _caption_weights_shape,
    "08.output-shape": _attention_output_shape,
    "08.learned-parameters": _learned_position_parameters,
    "08.position-norm": _position_norm,
    "08.position-dot": _position_dot,
    "09.heads-shape": _heads_shape,
    "09.cross-weights-shape": _cross_weights_shape,
    "09.parameter-count": _layer_parameters,
    "09.combined-mask-shape": _combined_mask_shape,
    "09.bottom-right-count": _bottom_right_count,
    "09.outputs-that-move": _changed_outputs,
    "09.weights-memory": _weights_mebibytes,
    "10.embedding-scale": _scaled_embedding_std,
    "10.encoder-block-parameters": _encoder_block_parameters,
    "10.tied-output": _tied_output_parameters,
    "10.post-norm-size": _post_norm_size,
    "10.smoothed-target": _smoothed_target,
    "10.warmup-decay": _decay_ratio,
    "11.cache-shape": _self_cache_shape,
    "11.cache-numbers": _self_cache_numbers,
    "11.length-penalty": _length_penalty_winners,
    "11.window-pairs": _window_count,
    "11.rolling-buffer": _buffer_size,
    "11.receptive-field": _receptive_field,
}

COMPUTED: dict[str, Callable[[], object]] = {qid: _isolated(compute)
                                             for qid, compute in _KEYS.items()}
