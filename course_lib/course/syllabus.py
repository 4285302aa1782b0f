"""The course map: lessons 00 to 11, and which of them exist yet.

README.md's syllabus table and lesson 00's course map are both checked against this list.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from course_lib.course.study_time import stated_minutes
from course_lib.paths import COURSE_ROOT


@dataclass(frozen=True)
class Lesson:
    number: str
    slug: str
    title: str
    covers: str
    optional: bool = False  # later lessons mention it but do not build on it

    @property
    def notebook(self) -> str:
        return f"notebooks/{self.number}_{self.slug}.ipynb"

    def exists(self, root: Path = COURSE_ROOT) -> bool:
        return (root / self.notebook).is_file()


LESSONS = (
    Lesson("00", "start_here", "Start here",
           "course map, how to run, device report, how exercises and grading work"),
    Lesson("01", "embeddings", "Embeddings and dot-product similarity",
           "one-hot vs learned embeddings, dot product and cosine, GloVe neighbours and "
           "analogies, softmax with temperature"),
    Lesson("02", "rnn_encoder_decoder", "RNN encoder-decoder",
           "RNN/GRU/LSTM, the context vector, teacher forcing, greedy decoding, BLEU"),
    Lesson("03", "bottleneck", "The bottleneck and the idea of attention",
           "BLEU versus length, hard vs soft attention, kernel regression"),
    Lesson("04", "bahdanau", "Bahdanau (additive) attention",
           "additive score, masked softmax, alignment maps, BLEU by length"),
    Lesson("05", "luong", "Luong (multiplicative) attention",
           "dot/general/concat scores, input feeding, global vs local attention"),
    Lesson("06", "hard_attention", "Hard attention revisited",
           "REINFORCE with a baseline, straight-through Gumbel-softmax, gradient variance",
           optional=True),
    Lesson("07", "captioning", "Image captioning with a CNN encoder",
           "feature grids, Show-Attend-Tell, attention over image locations"),
    Lesson("08", "self_attention", "Self-attention and positional encoding",
           "Q/K/V, scaling by sqrt(d_k), permutation equivariance, positions"),
    Lesson("09", "multi_head", "Multi-head attention and masking",
           "heads as reshapes, padding and causal masks, agreement with PyTorch"),
    Lesson("10", "transformer", "The Transformer",
           "encoder/decoder blocks, label smoothing, warm-up, greedy and beam decoding"),
    Lesson("11", "efficient_attention", "Efficient attention and decoding",
           "KV cache, beam search, fused kernels, windowed attention"),
)


def course_map(root: Path = COURSE_ROOT):
    """The lessons as a pandas DataFrame with ``path`` (core or optional), ``minutes`` (the
    study time the lesson states, training not included) and ``available`` columns."""
    import pandas as pd

    return pd.DataFrame(
        [{"lesson": lesson.number, "title": lesson.title, "covers": lesson.covers,
          "path": "optional" if lesson.optional else "core",
          "minutes": stated_minutes(root / lesson.notebook) if lesson.exists(root) else None,
          "available": "yes" if lesson.exists(root) else "coming", "notebook": lesson.notebook}
         for lesson in LESSONS]
    ).set_index("lesson")
