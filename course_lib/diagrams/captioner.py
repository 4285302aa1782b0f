"""The diagrams of lessons 06 and 07: soft against hard reading of S items, and Show, Attend
and Tell, from the image to one word."""

from __future__ import annotations

from course_lib.diagrams.canvas import Arrow, Box, Diagram, Dims
from course_lib.diagrams.recurrent import ROW
from course_lib.models.captioner import CaptionerConfig, CNNEncoder
from course_lib.models.pointer import PointerConfig


def _stages(config: CaptionerConfig) -> str:
    """The CNN's stages in a few words: "2 stages" when every conv has its pool, else counts."""
    stages, pools = len(config.channels), len(config.pool_after)
    return f"{stages} stages" if pools == stages else f"{stages} conv, {pools} pools"


def show_attend_tell_diagram(config: CaptionerConfig, image_size: tuple[int, int],
                             batch: int = 32) -> Diagram:
    """Show, Attend and Tell as :class:`~course_lib.models.captioner.ShowAttendTell` computes it.

    The CNN turns the image into a grid; each location's feature vector h_j holds the CNN's
    local features, then (with ``config.coords``) the cell's x and y, then (with
    ``config.read_convs``) the wide view of the read convolutions, which run on the CNN's grid.
    The first d_k channels (local features and coordinates) are the keys k_j. At every step the
    previous state s_{t−1} scores each key, the weights a_t average the features into c_t (scaled
    by the gate β_t when ``config.gate``), the LSTM reads [E[y_{t−1}]; c_t], and the deep output
    layer reads E[y_{t−1}], s_t and c_t (``AttentionLSTMDecoder.step``)."""
    encoder = CNNEncoder(config)
    rows, cols = encoder.grid_shape(*image_size)
    dims = Dims({"B": batch, "C_in": config.in_channels, "H_img": image_size[0],
                 "W_img": image_size[1], "C'": config.channels[-1], "H'": rows, "W'": cols,
                 "L": rows * cols, "C": encoder.feature_size, "d_k": encoder.key_size,
                 "H": config.hidden_size, "d_e": config.embed_dim, "V": config.vocab_size})
    reads = r"$c_t = \beta_t\, \Sigma_j\, a_{tj} h_j$" if config.gate else \
        r"$c_t = \Sigma_j\, a_{tj} h_j$"
    parts = ["local", *(["$x, y$"] if config.coords else []),
             *(["wide"] if config.read_convs else [])]
    grid = dims("B", "C'", "H'", "W'")  # the CNN's output, before it is flattened
    boxes = [Box("image", 5, -0.5, "image", "input"),
             Box("cnn", 16.5, -0.5, f"CNN: {_stages(config)}", "layer"),
             Box("a", 28.5, 0, f"features $h_1 \\ldots h_L$\n[{'; '.join(parts)}]", "state"),
             Box("score", 8, ROW, r"$e_{tj} = v^\top \tanh(W s_{t-1} + U k_j + b)$",
                 "attention"),
             Box("softmax", 19.8, ROW, "softmax$_j$", "op"),
             Box("read", 28, ROW, reads, "op"),
             Box("y", 35, 2 * ROW, "$E[y_{t-1}]$", "input"),
             Box("h_prev", 8, 2 * ROW, "$s_{t-1}$", "state"),
             Box("lstm", 20, 2 * ROW, "LSTM step", "layer"),
             Box("out", 28, 3 * ROW, "deep output", "layer"),
             Box("h", 20, 3 * ROW, "$s_t$", "state"),
             Box("p", 36, 3 * ROW, "$p(y_t)$", "op")]
    arrows = [Arrow("image", "cnn", dims("B", "C_in", "H_img", "W_img")),
              Arrow("cnn", "a", grid),
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
              Arrow("y", "out", dims("B", "d_e")),
              Arrow("read", "out", dims("B", "C")),
              Arrow("out", "p", dims("B", "V")),
              Arrow("h", "h_prev", None, text="next step", dashed=True, bend=0.15)]
    if config.read_convs:
        convs = "conv" if config.read_convs == 1 else "convs"
        boxes.append(Box("wide", 36.5, 0, f"{config.read_convs} read\n{convs}", "layer",
                         shows_shape=False))
        # under the features box to the read convs, which keep the grid's shape
        arrows += [Arrow("cnn", "wide", grid, via=((16.5, -2.8), (36.5, -2.8))),
                   Arrow("wide", "a", None)]
    gate = "with the gate β" if config.gate else "without a gate"
    return Diagram(f"Show, Attend and Tell ({gate})", boxes, arrows, dims)


def hard_vs_soft_diagram(config: PointerConfig, items: int, batch: int = 32) -> Diagram:
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
