"""The diagrams of lessons 06 and 07: soft against hard reading of S items, and Show, Attend
and Tell, from the image to one word."""

from __future__ import annotations

from course_lib.diagrams.canvas import Arrow, Box, Diagram, Dims
from course_lib.diagrams.recurrent import ROW
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
    convs = f"CNN: {len(config.channels)} conv,\n{len(config.pool_after)} pools"
    grid = "the grid with coordinates" if config.coords else "the grid, flattened"
    boxes = [Box("image", 5, 0, "image", "input"),
             Box("cnn", 16.5, 0, convs, "layer"),
             Box("a", 28.5, 0, f"features $h_1 \\ldots h_L$\n({grid})", "state"),
             Box("score", 8, ROW, r"$e_{tj} = v^\top \tanh(W s_{t-1} + U k_j + b)$",
                 "attention"),
             Box("softmax", 20.5, ROW, "softmax over $j$", "op"),
             Box("read", 30, ROW, reads, "op"),
             Box("h_prev", 8, 2 * ROW, "$s_{t-1}$", "state"),
             Box("lstm", 30, 2 * ROW, "LSTM step", "layer"),
             Box("y", 36.5, 2 * ROW, "$E[y_{t-1}]$", "input"),
             Box("h", 30, 3 * ROW, "$s_t$", "state"),
             Box("out", 19, 3 * ROW, r"deep output → $y_t$", "layer")]
    arrows = [Arrow("image", "cnn", dims("B", "C_in", "H_img", "W_img")),
              Arrow("cnn", "a", dims("B", "C", "H'", "W'") if not config.coords and
                    not config.read_convs else None),
              Arrow("a", "score", dims("B", "L", "d_k"), text="$k_j$", side="left"),
              Arrow("h_prev", "score", dims("B", "H")),
              Arrow("score", "softmax", dims("B", "L")),
              Arrow("softmax", "read", dims("B", "L")),
              Arrow("a", "read", dims("B", "L", "C")),
              Arrow("read", "lstm", dims("B", "C")),
              Arrow("y", "lstm", dims("B", "d_e")),
              Arrow("h_prev", "lstm", dims("B", "H")),
              Arrow("lstm", "h", dims("B", "H")),
              Arrow("h", "out", dims("B", "H")),
              Arrow("h", "h_prev", None, text="next step", dashed=True, bend=-0.1)]
    gate = "with the gate β" if config.gate else "without a gate"
    return Diagram(f"Show, Attend and Tell ({gate})", boxes, arrows, dims,
                   caption="Location j of the grid is cell (j // W', j % W') of the image, "
                           "counting from 0.")


def hard_vs_soft_diagram(config: HardAttentionConfig, items: int, batch: int = 32) -> Diagram:
    """Lesson 06's pointer network read two ways: soft attention averages the values with the
    weights a; hard attention samples one item j ~ Categorical(a) and reads its value alone."""
    dims = Dims({"B": batch, "S": items, "d": config.dim, "d_v": config.value_dim,
                 "V": config.n_classes})
    boxes = [Box("query", 2.5, 0, "query $q$", "input"),
             Box("keys", 13, 0, "keys $k_1 \\ldots k_S$", "input"),
             Box("score", 7.5, ROW, r"scores $e_j = q^\top W_g k_j$", "attention"),
             Box("softmax", 21, ROW, "$a = $ softmax$(e)$", "op"),
             Box("soft", 7, 2 * ROW, r"soft: $c = \Sigma_j\, a_j v_j$", "op"),
             Box("values", 21, 2 * ROW, "values $v_1 \\ldots v_S$", "input"),
             Box("hard", 34, 2 * ROW, r"hard: $j \sim a$, $c = v_j$", "op"),
             Box("classify", 21, 3 * ROW, "linear → label", "layer"),
             Box("label", 34, 3 * ROW, "logits over the $V$ labels", "op")]
    arrows = [Arrow("query", "score", dims("B", "d")), Arrow("keys", "score", dims("B", "S", "d")),
              Arrow("score", "softmax", dims("B", "S")),
              Arrow("softmax", "soft", dims("B", "S")),
              Arrow("softmax", "hard", dims("B", "S")),
              Arrow("values", "soft", dims("B", "S", "d_v")),
              Arrow("values", "hard", dims("B", "S", "d_v")),
              Arrow("soft", "classify", dims("B", "d_v"), text="gradient to $e$", side="left"),
              Arrow("hard", "classify", dims("B", "d_v"), text="no gradient to $e$",
                    side="right"),
              Arrow("classify", "label", dims("B", "V"))]
    return Diagram("Soft and hard attention over S items", boxes, arrows, dims,
                   caption="Hard attention needs REINFORCE or a relaxation (Gumbel-softmax) to "
                           "train the scores.")
