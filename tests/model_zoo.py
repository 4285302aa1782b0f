"""Every nn.Module in course_lib, with tiny inputs, for the device-agnostic tests.

A new model class in course_lib must be added here: tests/test_device_agnostic.py fails for any
nn.Module subclass of the package that this table does not cover.
"""

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import nn

from course_lib.models.attention_seq2seq import (
    AttentionSeq2Seq,
    AttentionSeq2SeqConfig,
    BahdanauDecoder,
    LuongDecoder,
)
from course_lib.models.captioner import (
    AttentionLSTMDecoder,
    CaptionerConfig,
    CNNEncoder,
    ShowAttendTell,
)
from course_lib.models.pointer import PointerConfig, PointerNet
from course_lib.models.reencode import ReencodeConfig, ReencodingSeq2Seq
from course_lib.models.seq2seq import Decoder, Encoder, Seq2Seq, Seq2SeqConfig
from course_lib.models.torch_transformer import TorchTransformer
from course_lib.models.toy import ToyClassifier, ToyConfig
from course_lib.models.transformer import (
    DecoderBlock,
    EncoderBlock,
    FeedForward,
    ResidualSublayer,
    Transformer,
    TransformerConfig,
)
from course_lib.nn.attention import AdditiveScore, ConcatScore, DotScore, GeneralScore
from course_lib.nn.cells import ScratchGRUCell, ScratchLSTMCell, ScratchRNNCell
from course_lib.nn.positions import LearnedPositions, SinusoidalPositions
from course_lib.nn.self_attention import MultiHeadAttention

SEQ = Seq2SeqConfig(12, 14, embed_dim=6, hidden_size=8)
SEQ_LSTM_BI = Seq2SeqConfig(12, 14, embed_dim=6, hidden_size=8, cell="lstm", bidirectional=True)
BAHDANAU = AttentionSeq2SeqConfig(12, 14, embed_dim=6, hidden_size=8)
CAPTIONER = CaptionerConfig(9, in_channels=3, channels=(4, 6), pool_after=(0,), embed_dim=5,
                            hidden_size=8, attention_size=6)
CAPTIONER_WIDE = replace(CAPTIONER, read_convs=1, pool_before_norm=True)  # the digit recipe
TRANSFORMER = TransformerConfig(12, 14, d_model=8, num_heads=2, num_encoder_layers=1,
                                num_decoder_layers=1, d_ff=16, max_len=10)
LUONG_LOCAL_P = AttentionSeq2SeqConfig(12, 14, embed_dim=6, hidden_size=8, cell="lstm",
                                       attention="luong", score="general", local="p", window=2)


def tokens(device, shape, high):
    return torch.randint(4, high, shape).to(device)


def score_inputs(device, query_size=6, key_size=6):
    """A query for every one of 3 target steps and 5 keys: (2, 3, d_q) and (2, 5, d_k)."""
    return torch.randn(2, 3, query_size, device=device), torch.randn(2, 5, key_size, device=device)


class Scored(nn.Module):
    """Wraps a score module so that forward takes raw keys: ``score(query, keys)``."""

    def __init__(self, score: nn.Module) -> None:
        super().__init__()
        self.inner = score

    def forward(self, query, keys):
        return self.inner.score(query, keys)


@dataclass
class ZooEntry:
    model_class: type[nn.Module]
    build: Callable[[], nn.Module]
    inputs: Callable[[torch.device], tuple]


ZOO = [
    ZooEntry(ToyClassifier, lambda: ToyClassifier(ToyConfig(hidden=8)),
             lambda device: (torch.randn(4, 2, device=device),)),
    ZooEntry(ScratchRNNCell, lambda: ScratchRNNCell(5, 7),
             lambda device: (torch.randn(3, 5, device=device), torch.zeros(3, 7, device=device))),
    ZooEntry(ScratchGRUCell, lambda: ScratchGRUCell(5, 7),
             lambda device: (torch.randn(3, 5, device=device), torch.zeros(3, 7, device=device))),
    ZooEntry(ScratchLSTMCell, lambda: ScratchLSTMCell(5, 7),
             lambda device: (torch.randn(3, 5, device=device),
                             (torch.zeros(3, 7, device=device), torch.zeros(3, 7, device=device)))),
    # Packed sequences need their lengths on the CPU, so the meta check runs unpadded batches.
    ZooEntry(Encoder, lambda: Encoder(SEQ_LSTM_BI), lambda device: (tokens(device, (2, 5), 12),)),
    ZooEntry(Decoder, lambda: Decoder(SEQ),
             lambda device: (tokens(device, (2, 4), 14), torch.randn(2, 8, device=device))),
    ZooEntry(ReencodingSeq2Seq, lambda: ReencodingSeq2Seq(ReencodeConfig(12, 14, 6, 8)),
             lambda device: (tokens(device, (2, 5), 12), None, tokens(device, (2, 4), 14))),
    ZooEntry(Seq2Seq, lambda: Seq2Seq(SEQ),
             lambda device: (tokens(device, (2, 5), 12), None, tokens(device, (2, 4), 14))),
    ZooEntry(DotScore, lambda: Scored(DotScore(6)), score_inputs),
    ZooEntry(GeneralScore, lambda: Scored(GeneralScore(6, 4)),
             lambda device: score_inputs(device, 6, 4)),
    ZooEntry(AdditiveScore, lambda: Scored(AdditiveScore(6, 4, 5)),
             lambda device: score_inputs(device, 6, 4)),
    ZooEntry(ConcatScore, lambda: Scored(ConcatScore(6, 4, 5)),
             lambda device: score_inputs(device, 6, 4)),
    ZooEntry(AttentionSeq2Seq, lambda: AttentionSeq2Seq(BAHDANAU),
             lambda device: (tokens(device, (2, 5), 12), None, tokens(device, (2, 4), 14))),
    ZooEntry(PointerNet, lambda: PointerNet(PointerConfig(dim=4, n_classes=6)),
             lambda device: (torch.randn(3, 4, device=device), torch.randn(3, 5, 4, device=device),
                             tokens(device, (3, 5), 6) - 4)),
    # A decoder runs one step at a time inside its model: each is covered through a model.
    ZooEntry(BahdanauDecoder, lambda: AttentionSeq2Seq(BAHDANAU),
             lambda device: (tokens(device, (2, 5), 12), None, tokens(device, (2, 4), 14))),
    ZooEntry(LuongDecoder, lambda: AttentionSeq2Seq(LUONG_LOCAL_P),
             lambda device: (tokens(device, (2, 5), 12), None, tokens(device, (2, 4), 14))),
    ZooEntry(CNNEncoder, lambda: CNNEncoder(CAPTIONER),
             lambda device: (torch.rand(2, 3, 8, 12, device=device),)),
    ZooEntry(ShowAttendTell, lambda: ShowAttendTell(CAPTIONER_WIDE),
             lambda device: (torch.rand(2, 3, 8, 12, device=device), tokens(device, (2, 4), 9))),
    ZooEntry(AttentionLSTMDecoder, lambda: ShowAttendTell(CAPTIONER),
             lambda device: (torch.rand(2, 3, 8, 12, device=device), tokens(device, (2, 4), 9))),
    ZooEntry(MultiHeadAttention, lambda: MultiHeadAttention(8, 2),
             lambda device: (torch.randn(2, 3, 8, device=device),
                             torch.randn(2, 5, 8, device=device))),
    ZooEntry(SinusoidalPositions, lambda: SinusoidalPositions(8, 10),
             lambda device: (torch.randn(2, 3, 8, device=device),)),
    ZooEntry(LearnedPositions, lambda: LearnedPositions(8, 10),
             lambda device: (torch.randn(2, 3, 8, device=device),)),
    ZooEntry(FeedForward, lambda: FeedForward(8, 16, 0.1),
             lambda device: (torch.randn(2, 3, 8, device=device),)),
    # Blocks and their residual sub-layers, with a padding mask.
    ZooEntry(EncoderBlock, lambda: EncoderBlock(TRANSFORMER),
             lambda device: (torch.randn(2, 5, 8, device=device),
                             torch.ones(2, 5, dtype=torch.bool, device=device))),
    ZooEntry(ResidualSublayer, lambda: EncoderBlock(TRANSFORMER),
             lambda device: (torch.randn(2, 5, 8, device=device),)),
    ZooEntry(DecoderBlock, lambda: DecoderBlock(TRANSFORMER),
             lambda device: (torch.randn(2, 3, 8, device=device),
                             torch.randn(2, 5, 8, device=device),
                             torch.ones(2, 5, dtype=torch.bool, device=device))),
    ZooEntry(Transformer, lambda: Transformer(TRANSFORMER),
             lambda device: (tokens(device, (2, 5), 12), None, tokens(device, (2, 4), 14))),
    ZooEntry(TorchTransformer, lambda: TorchTransformer(TRANSFORMER),
             lambda device: (tokens(device, (2, 5), 12), torch.tensor([5, 3]).to(device),
                             tokens(device, (2, 4), 14))),
]
