"""The diagrams of lessons 06 and 07: soft against hard reading of S items, and Show, Attend
and Tell, from the image to one word."""

from __future__ import annotations

from course_lib.diagrams.canvas import Arrow, Box, Diagram, Dims
from course_lib.models.captioner import CaptionerConfig, CNNEncoder
from course_lib.models.pointer import HardAttentionConfig


def show_attend_tell_diagram(config: CaptionerConfig, image_size: tuple[int, int],
                             batch: int = 32) -> Diagram:
    """The CNN turns the image into a grid of L = H'·W' feature vectors h_j, whose first d_k
    channels are the keys k_j; at every step the LSTM's previous state s_{t−1} scores each key,
    the weights a_t average the features into c_t (scaled by the gate β_t when
    ``config.gate``), and the LSTM reads [E[y_{t−1}]; c_t]."""
    encoder = CNNEncoder(config)
    rows, cols = encoder.grid_shape(*image_size)
    dims = Dims({"B": batch, "C_in": config.in_channels, "H_img": image_size[0],
                 "W_img": image_size[1], "H'": rows, "W'": cols, "L": rows * cols,
                 "C": encoder.feature_size, "d_k": encoder.key_size,
                 "H": config.hidden_size, "d_e": config.embed_dim,
                 "V": config.vocab_size})
    reads = r"$c_t = \beta_t\, \Sigma_j\, a_{tj} h_j$" if config.gate else \
        r"$c_t = \Sigma_j\, a_{tj} h_j$"
    convs = f"{len(config.channels)} conv + BatchNorm + ReLU, {len(config.pool_after)} pools"
    boxes = [Box("image", 0, 0, "image", "input"),
             Box("cnn", 0, 2.2, convs, "layer", width=4.2),
             Box("grid", 0, 4.4, "grid + coordinates, flattened", "op", width=3.6),
             Box("a", 0, 6.6, r"features $h_1 \ldots h_L$", "state", width=3.0),
             Box("score", 4.6, 6.6, r"$e_{tj} = v^\top \tanh(W s_{t-1} + U k_j + b)$",
                 "attention", width=4.6),
             Box("softmax", 9.4, 6.6, "softmax over $j$", "op"),
             Box("read", 13.0, 6.6, reads, "op", width=2.8),
             Box("h_prev", 4.6, 9.0, "$s_{t-1}$", "state", width=1.4),
             Box("y", 16.6, 4.4, "$y_{t-1}$", "input", width=1.4),
             Box("lstm", 16.6, 6.6, "LSTM step", "layer"),
             Box("h", 16.6, 9.0, "$s_t$", "state", width=1.4),
             Box("out", 20.2, 9.0, r"deep output → $y_t$", "layer", width=2.6)]
    arrows = [Arrow("image", "cnn", dims("B", "C_in", "H_img", "W_img")),
              Arrow("cnn", "grid", dims("B", "C", "H'", "W'") if not config.coords and
                    not config.read_convs else None),
              Arrow("grid", "a", dims("B", "L", "C")),
              Arrow("a", "score", dims("B", "L", "d_k"), text="$k_j$"),
              Arrow("h_prev", "score", dims("B", "H")),
              Arrow("score", "softmax", dims("B", "L"), text=r"$e_t$"),
              Arrow("softmax", "read", dims("B", "L"), text=r"$a_t$"),
              Arrow("a", "read", dims("B", "L", "C"), bend=-0.2),
              Arrow("read", "lstm", dims("B", "C"), text="$c_t$"),
              Arrow("y", "lstm", dims("B", "d_e"), text="$E[y]$"),
              Arrow("h_prev", "lstm", dims("B", "H"), bend=-0.2),
              Arrow("lstm", "h", dims("B", "H")),
              Arrow("h", "out", dims("B", "H")),
              Arrow("h", "h_prev", None, text="next step", dashed=True, bend=0.06)]
    gate = "with the gate β" if config.gate else "without a gate"
    return Diagram(f"Show, Attend and Tell ({gate})", boxes, arrows, dims,
                   caption="Location j of the grid is cell (j // W', j % W') of the image, "
                           "counting from 0.")


def hard_vs_soft_diagram(config: HardAttentionConfig, items: int, batch: int = 32) -> Diagram:
    """Lesson 06's pointer network read two ways: soft attention averages the values with the
    weights a; hard attention samples one item j ~ Categorical(a) and reads its value alone."""
    dims = Dims({"B": batch, "S": items, "d": config.dim, "d_v": config.value_dim,
                 "V": config.n_classes})
    boxes = [Box("query", -2.2, 0, "query $q$", "input"),
             Box("keys", 2.2, 0, "keys $k_1 \\ldots k_S$", "input", width=2.4),
             Box("score", 0, 2.2, r"scores $e_j = q^\top W_g k_j$", "attention", width=3.0),
             Box("softmax", 0, 4.4, "$a = $ softmax$(e)$", "op", width=2.4),
             Box("soft", -4.2, 6.8, r"soft: $c = \Sigma_j\, a_j v_j$", "op", width=3.0),
             Box("hard", 4.2, 6.8, r"hard: $j \sim a$, $c = v_j$", "op", width=3.0),
             Box("values", 0, 6.8, "values $v_1 \\ldots v_S$", "input", width=2.6),
             Box("classify", 0, 9.2, "linear → label", "layer", width=2.4),
             Box("label", 0, 11.4, "logits over the $V$ labels", "op", width=3.0)]
    arrows = [Arrow("query", "score", dims("B", "d")), Arrow("keys", "score", dims("B", "S", "d")),
              Arrow("score", "softmax", dims("B", "S")),
              Arrow("softmax", "soft", dims("B", "S"), text="$a$"),
              Arrow("softmax", "hard", dims("B", "S"), text="$a$"),
              Arrow("values", "soft", dims("B", "S", "d_v")),
              Arrow("values", "hard", dims("B", "S", "d_v")),
              Arrow("soft", "classify", dims("B", "d_v"), text="gradient to $e$"),
              Arrow("hard", "classify", dims("B", "d_v"), text="no gradient to $e$", dashed=True),
              Arrow("classify", "label", dims("B", "V"))]
    return Diagram("Soft and hard attention over S items", boxes, arrows, dims,
                   caption="Hard attention needs REINFORCE or a relaxation (Gumbel-softmax) to "
                           "train the scores.")
