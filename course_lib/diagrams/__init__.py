"""Architecture diagrams drawn from the models' configs, so the shapes they print are the
shapes the models use: :mod:`~course_lib.diagrams.canvas` holds what a diagram is made of,
:mod:`~course_lib.diagrams.drawing` draws it, :mod:`~course_lib.diagrams.display` says how large
its text is where it is shown, and the other modules lay out one family of models each."""

from course_lib.diagrams.canvas import Arrow, Box, Diagram, Dims, Shape
from course_lib.diagrams.captioner import hard_vs_soft_diagram, show_attend_tell_diagram
from course_lib.diagrams.drawing import draw
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

__all__ = ["HANDOVERS", "Arrow", "Box", "Diagram", "Dims", "Shape", "bahdanau_diagram",
           "context_per_step_diagram", "draw", "encoder_decoder_diagram", "hard_vs_soft_diagram",
           "heads_diagram", "kv_cache_diagram", "luong_diagram", "self_attention_diagram",
           "show_attend_tell_diagram", "transformer_diagram"]
