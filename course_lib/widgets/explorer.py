"""The attention explorer: one widget for the weights between query tokens and key tokens (or
the regions of an image), in the lab and on the site (``embed``).

Rows are queries and columns are keys, as everywhere in the course: row t is the distribution
α_t = softmax(e_t) over the keys, so each row sums to 1 and a masked key has weight 0. Several
views (models, layers, heads) can share one explorer; the widget offers a selector for each
label that takes more than one value.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from course_lib.arguments import BOOL, FLOATING, check_tensor, shape_of
from course_lib.widgets.embed import EmbeddedWidget

ROW_SUM_TOLERANCE = 1e-3
DIGITS = 6  # weights are saved to six decimals: rows still sum to 1 within 1e-3 for 100 keys


class AttentionExplorer(EmbeddedWidget):
    """Attention weights to explore: point at a query to see its row over the keys."""

    widget_name = "explorer"


def _tokens(name: str, tokens: object, size: int, what: str) -> list[str]:
    if isinstance(tokens, str) or not isinstance(tokens, Sequence):
        raise TypeError(f"{name} must be a list of token strings, got {type(tokens).__name__}")
    if len(tokens) != size:
        raise ValueError(f"{name} must have one token per {what} ({size}), got {len(tokens)}")
    return [str(token) for token in tokens]


def _image_data(image: object, grid: object, keys: int) -> dict:
    """The image as a PNG data URL, with the grid of regions the keys are."""
    array = np.asarray(image.detach().cpu() if isinstance(image, torch.Tensor) else image)
    if array.ndim == 3 and array.shape[0] in (1, 3) and array.shape[-1] not in (1, 3, 4):
        array = array.transpose(1, 2, 0)  # (C, H, W) -> (H, W, C), as torch stores images
    if array.ndim == 3 and array.shape[-1] == 1:
        array = array[..., 0]  # (H, W, 1) -> (H, W)
    if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[-1] not in (1, 3, 4)):
        raise ValueError(f"image must have shape (H, W) or (H, W, 3), got {array.shape}")
    if (not isinstance(grid, Sequence) or len(grid) != 2
            or not all(isinstance(g, int) and g > 0 for g in grid)):
        raise ValueError(f"grid must be (rows, cols) of positive ints, got {grid!r}")
    if grid[0] * grid[1] != keys:
        raise ValueError(f"grid {tuple(grid)} has {grid[0] * grid[1]} regions but the weights "
                         f"have {keys} keys")
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    floating = np.issubdtype(array.dtype, np.floating)
    plt.imsave(buffer, np.clip(array, 0, 1) if floating else array, format="png",
               cmap="gray" if array.ndim == 2 else None)
    return {"src": "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode(),
            "rows": grid[0], "cols": grid[1],
            "alt": f"the image, divided into {grid[0]} by {grid[1]} regions (the keys)"}


def _check_weights(weights: torch.Tensor, masks: torch.Tensor | None) -> None:
    if not torch.isfinite(weights).all():
        raise ValueError("weights must be finite, got NaN or infinity")
    if (weights < 0).any():
        raise ValueError(f"weights must be >= 0 (softmax outputs), got {weights.min().item():g}")
    worst = (weights.sum(-1) - 1).abs().max().item()
    if worst > ROW_SUM_TOLERANCE:
        raise ValueError(f"each row of weights must sum to 1 (rows are queries, columns keys), "
                         f"but a row is off by {worst:.3g}; pass softmax outputs, not scores, "
                         "and put queries first")
    if masks is not None:
        if masks.shape != weights.shape:
            raise ValueError(f"masks must have the shape of weights {shape_of(weights)}, got "
                             f"{shape_of(masks)}")
        leak = weights[masks].abs().max().item() if masks.any() else 0.0
        if leak > 1e-6:
            raise ValueError(f"a masked key has weight {leak:.3g}; masked keys must have 0")


def _view(index: int, view: Mapping, names: list[str], grid) -> dict:
    """One view's data, its tokens, weights and mask checked against each other."""
    where = f"views[{index}]"
    weights = check_tensor(f"{where}['weights']", view.get("weights"), dtype=FLOATING, ndim=2)
    weights = weights.detach().double().cpu()
    masks = view.get("masks")
    if masks is not None:
        masks = check_tensor(f"{where}['masks']", masks, dtype=BOOL, ndim=2).detach().cpu()
    _check_weights(weights, masks)
    n_queries, n_keys = weights.shape
    keys = view.get("keys")
    if keys is None and grid is not None and grid[0] * grid[1] == n_keys:
        keys = [f"{r},{c}" for r in range(grid[0]) for c in range(grid[1])]  # row, column
    if keys is None:
        raise ValueError(f"{where}: keys must be a list of tokens unless an image and a grid "
                         f"of {n_keys} regions are given")
    labels = dict(view.get("labels") or {})
    if set(labels) != set(names):
        raise ValueError(f"{where}: every view's labels must name the same {names}, got "
                         f"{sorted(labels)}")
    return {"labels": {n: str(labels[n]) for n in names},
            "queries": _tokens(f"{where}['queries']", view.get("queries"), n_queries,
                               "query (row of weights)"),
            "keys": _tokens(f"{where}['keys']", keys, n_keys, "key (column of weights)"),
            "weights": weights.round(decimals=DIGITS).tolist(),
            "masked": masks.tolist() if masks is not None else None}


def explorer_from_views(views: Sequence[Mapping], *, title: str = "Attention weights",
                        query_label: str = "queries", key_label: str = "keys",
                        image: object = None, grid: tuple[int, int] | None = None
                        ) -> AttentionExplorer:
    """An explorer of several views, each a mapping with ``weights`` (a ``(Tq, Tk)`` tensor,
    rows are queries), ``queries`` and ``keys`` (their tokens), optional ``masks`` (bool, True =
    masked) and ``labels`` (its place, e.g. ``{"layer": 1, "head": 0}``: the widget offers one
    selector per label name). With ``image`` and ``grid=(rows, cols)`` the keys are the image's
    regions, row-major, and ``keys`` may be left out."""
    if isinstance(views, Mapping) or not isinstance(views, Sequence) or not views:
        raise TypeError("views must be a non-empty list of mappings (one per view)")
    names = list(dict.fromkeys(name for view in views for name in (view.get("labels") or {})))
    data = {"title": str(title), "query_label": str(query_label), "key_label": str(key_label),
            "selectors": names, "views": [_view(i, v, names, grid) for i, v in enumerate(views)],
            "image": None}
    data["queries"], data["keys"] = data["views"][0]["queries"], data["views"][0]["keys"]
    if image is not None:
        data["image"] = _image_data(image, grid, len(data["keys"]))
    return AttentionExplorer(data=data)


def attention_explorer(queries: Sequence[str], keys: Sequence[str] | None, weights: torch.Tensor,
                       *, masks: torch.Tensor | None = None,
                       labels: Sequence[Mapping[str, object]] | None = None,
                       **options) -> AttentionExplorer:
    """An explorer of ``weights``, shape ``(Tq, Tk)`` or ``(V, Tq, Tk)`` for V views that share
    their tokens; ``masks`` (bool, True = masked) has the shape of ``weights`` or ``(Tq, Tk)``;
    ``labels`` names each view's place. ``options`` as in ``explorer_from_views``."""
    weights = check_tensor("weights", weights, dtype=FLOATING, ndim=(2, 3))
    views = weights.unsqueeze(0) if weights.dim() == 2 else weights  # (V, Tq, Tk)
    if masks is not None:
        masks = check_tensor("masks", masks, dtype=BOOL, ndim=(2, 3))
        masks = masks.unsqueeze(0) if masks.dim() == 2 else masks  # (V or 1, Tq, Tk)
        if masks.shape[1:] != views.shape[1:] or masks.shape[0] not in (1, views.shape[0]):
            raise ValueError(f"masks must have the shape of weights {shape_of(weights)} or "
                             f"(Tq, Tk) = {shape_of(views)[1:]}, got {shape_of(masks)}")
        masks = masks.expand_as(views)
    if labels is not None and (isinstance(labels, Mapping) or len(labels) != views.shape[0]):
        raise ValueError(f"labels must be a list of one mapping per view ({views.shape[0]})")
    return explorer_from_views(
        [{"queries": queries, "keys": keys, "weights": views[v],
          "masks": None if masks is None else masks[v],
          "labels": labels[v] if labels is not None else {}} for v in range(views.shape[0])],
        **options)
