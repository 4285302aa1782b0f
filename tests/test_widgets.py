"""The course's widgets in Python: the explorer refuses what it cannot show truthfully (a table
of bad inputs), keeps every number it is given, and shows Transformers' causal masks; a saved
control keeps one output per value within its budget; the site script holds every module."""

from __future__ import annotations

import json

import ipywidgets as widgets
import numpy as np
import pytest
import torch

from course_lib.lessons.explorers import transformer_views
from course_lib.models.transformer import Transformer, TransformerConfig
from course_lib.nn.self_attention import causal_mask
from course_lib.widgets.controls import control_values, site_choices, static_copy
from course_lib.widgets.embed import WIDGET_NAMES, module_as_script, site_script
from course_lib.widgets.explorer import attention_explorer, explorer_from_views

Q, K = ["a", "b", "c"], ["w", "x", "y", "z"]


def softmax_rows(*shape: int) -> torch.Tensor:
    return torch.softmax(torch.randn(*shape, generator=torch.Generator().manual_seed(0)), -1)


GOOD = softmax_rows(3, 4)
BAD_EXPLORERS = {
    "weights a list": (dict(weights=GOOD.tolist()), TypeError, "weights must be a torch.Tensor"),
    "integer weights": (dict(weights=GOOD.long()), TypeError, "floating-point"),
    "one dimension": (dict(weights=GOOD[0]), ValueError, "2 or 3 dimensions"),
    "scores, not weights": (dict(weights=3 * torch.rand(3, 4)), ValueError, "sum to 1"),
    "NaN": (dict(weights=GOOD.clone().index_put_((torch.tensor(0), torch.tensor(0)),
                                                  torch.tensor(float("nan")))),
            ValueError, "finite"),
    "negative": (dict(weights=GOOD - 0.3), ValueError, ">= 0"),
    "keys and queries swapped": (dict(weights=GOOD.T.contiguous()), ValueError, "sum to 1"),
    "too few query tokens": (dict(queries=["a", "b"]), ValueError, "one token per query"),
    "one str of keys": (dict(keys="wxyz"), TypeError, "list of token strings"),
    "float mask": (dict(masks=torch.zeros(3, 4)), TypeError, "torch.bool"),
    "mask of another shape": (dict(masks=torch.zeros(4, 3, dtype=torch.bool)), ValueError,
                              "masks must have the shape"),
    "weight on a masked key": (dict(masks=torch.ones(3, 4, dtype=torch.bool).triu(1)),
                               ValueError, "masked key has weight"),
    "labels for two views of one": (dict(labels=[{"h": 0}, {"h": 1}]), ValueError,
                                    "one mapping per view"),
    "no keys and no image": (dict(keys=None), ValueError, "keys must be a list of tokens"),
    "grid of the wrong size": (dict(keys=None, image=np.zeros((8, 8)), grid=(3, 3)),
                               ValueError, "grid"),
}


@pytest.mark.parametrize("case", BAD_EXPLORERS, ids=list(BAD_EXPLORERS))
def test_the_explorer_refuses_bad_input_naming_the_argument(case):
    changes, error, message = BAD_EXPLORERS[case]
    arguments = {"queries": Q, "keys": K, "weights": GOOD, **changes}
    with pytest.raises(error, match=message):
        attention_explorer(arguments.pop("queries"), arguments.pop("keys"),
                           arguments.pop("weights"), **arguments)


def test_views_must_share_their_label_names():
    view = {"queries": Q, "keys": K, "weights": GOOD}
    with pytest.raises(ValueError, match="labels must name the same"):
        explorer_from_views([{**view, "labels": {"head": 0}}, {**view, "labels": {"layer": 1}}])
    with pytest.raises(TypeError, match="non-empty list"):
        explorer_from_views(view)


def test_the_explorer_keeps_every_weight_and_states_rows_are_queries():
    weights = softmax_rows(2, 3, 4)
    explorer = attention_explorer(Q, K, weights, labels=[{"head": 0}, {"head": 1}])
    data = explorer.data
    assert data["selectors"] == ["head"] and [v["labels"] for v in data["views"]] == [
        {"head": "0"}, {"head": "1"}]
    for view, expected in zip(data["views"], weights, strict=True):
        assert torch.tensor(view["weights"]).double() == pytest.approx(expected.double(),
                                                                       abs=1e-6)
        assert view["queries"] == Q and view["keys"] == K
    assert json.loads(json.dumps(data)) == data  # all of it is JSON


def test_an_image_explorer_names_the_regions_row_by_row_and_takes_torch_images():
    weights = softmax_rows(2, 6)
    image = torch.rand(3, 8, 12)  # (C, H, W), as torch stores it
    data = attention_explorer(["one", "two"], None, weights, image=image, grid=(2, 3)).data
    assert data["keys"] == [f"{r},{c}" for r in range(2) for c in range(3)]
    assert data["image"]["src"].startswith("data:image/png;base64,")
    assert (data["image"]["rows"], data["image"]["cols"]) == (2, 3)


def test_transformer_views_cover_every_kind_layer_and_head_with_the_causal_mask():
    config = TransformerConfig(src_vocab_size=12, tgt_vocab_size=12, d_model=16, num_heads=2,
                               num_encoder_layers=2, num_decoder_layers=3, d_ff=32, dropout=0.0)
    torch.manual_seed(0)
    model = Transformer(config).eval()
    src, tgt = torch.randint(4, 12, (2, 6)), torch.randint(4, 12, (2, 5))
    with torch.no_grad():
        maps = model.attention_maps(src, None, tgt)
    source, reads, predicts = list("abcdef"), list("vwxyz"), list("VWXYZ")
    views = transformer_views(maps, 1, source, reads, predicts)
    assert len(views) == (2 + 3 + 3) * (config.num_heads + 1)
    for view in views:
        kind, layer, head = (view["labels"][k] for k in ("kind", "layer", "head"))
        stored = {"cross": maps.cross, "decoder self": maps.decoder,
                  "encoder self": maps.encoder}[kind][layer - 1][1]  # (h, Tq, Tk)
        expected = stored.mean(dim=0) if head == "mean" else stored[int(head)]
        assert torch.equal(view["weights"], expected.float())
        assert view["weights"].sum(-1) == pytest.approx(torch.ones(len(view["queries"])),
                                                        abs=1e-5)
        if kind == "decoder self":
            assert torch.equal(view["masks"], ~causal_mask(5))
            assert view["weights"][view["masks"]].abs().max() == 0
        else:
            assert view["masks"] is None
    explorer_from_views(views)  # every view passes the explorer's own checks


def test_control_values_cover_each_kind_of_control():
    assert control_values(widgets.Checkbox()) == ("checkbox", [False, True], ["off", "on"])
    kind, values, labels = control_values(widgets.Dropdown(options=[("one", 1), ("two", 2)]))
    assert (kind, values, labels) == ("select", [1, 2], ["one", "two"])
    assert control_values(widgets.IntSlider(3, 0, 6, 2))[1] == [0, 2, 4, 6]
    assert control_values(widgets.FloatLogSlider(1, base=10, min=-1, max=1, step=1))[1] == \
        pytest.approx([0.1, 1, 10])
    with pytest.raises(TypeError, match="sliders, drop-downs and check boxes"):
        control_values(widgets.Text())


def test_site_choices_fit_the_budget_and_keep_the_current_value():
    controls = {"query": widgets.Dropdown(options=list("abcde")),
                "tau": widgets.FloatLogSlider(value=0.1, base=10, min=-2.5, max=1, step=0.05)}
    choices = site_choices(controls, 48)
    counts = [len(c["values"]) for c in choices]
    assert np.prod(counts) <= 48 and counts[0] == 5 and counts[1] >= 2
    tau = choices[1]
    assert tau["values"][tau["default"]] == 0.1  # the lab's starting value, exactly
    assert site_choices(controls, 9) is None  # 5 choices times two slider positions > 9


def test_a_static_copy_saves_one_output_per_combination_or_says_it_cannot():
    calls = []

    def show(n, flag):
        calls.append((n, flag))
        print(n, flag)

    controls = {"n": widgets.IntSlider(1, 0, 2), "flag": widgets.Checkbox(False)}
    copy = static_copy(show, controls, {}, budget=6)
    payload = json.loads(copy.split('type="application/json">')[1].split("</script>")[0])
    assert len(payload["outputs"]) == 6 and sorted(calls) == sorted(
        (n, f) for n in range(3) for f in (False, True))
    assert payload["outputs"]["2,1"] == "<pre>2 True\n</pre>"
    assert [c["default"] for c in payload["controls"]] == [1, 0]
    lab_only = static_copy(show, controls, {}, budget=3)
    assert "too many combinations" in lab_only and "data-course-embed" not in lab_only


def test_the_site_script_registers_every_widget_module():
    script = site_script()
    for name in WIDGET_NAMES:
        assert f'window.CourseWidgets["{name}"]' in script
        assert "export default" not in module_as_script(name)


def test_a_slider_keeps_at_most_the_positions_asked_for_and_its_current_one():
    controls = {"query": widgets.Dropdown(options=list("abc")),
                "n": widgets.IntSlider(value=7, min=0, max=20)}
    counts = [len(c["values"]) for c in site_choices(controls, 48)]
    assert counts == [3, 16]  # the budget alone: 3 × 16 ≤ 48
    capped = site_choices(controls, 48, most_per_slider=2)
    assert [len(c["values"]) for c in capped] == [3, 2] and capped[1]["thinned"]
    assert capped[1]["values"][capped[1]["default"]] == 7  # the lab's value is one of the two
    assert site_choices(controls, 5, most_per_slider=2) is None  # 3 × 2 > 5
    for bad in (1, 0, 2.5, True, "2"):
        with pytest.raises(ValueError, match="most_per_slider must be a whole number"):
            site_choices(controls, 48, most_per_slider=bad)
