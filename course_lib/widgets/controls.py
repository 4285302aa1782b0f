"""``interact``: ipywidgets' ``interact`` for the lessons, whose controls also respond on the site.

In the lab it is ipywidgets' ``interactive``: the kernel redraws the output when a control moves.
When the site build executes a lesson (``COURSE_SITE_CONTROLS`` set to the most outputs one
call may save), the call also runs the function once for every combination of the values its
controls take and saves each output (figures, printed text, tables) in a static copy that the
site's ``js/control.js`` draws: moving the control on the page shows the saved output for that
value. A slider with many positions keeps evenly spaced values (its current one among them) so
that all combinations fit the budget, and no more than ``COURSE_SITE_SLIDER_POSITIONS`` where
that is set; where even two positions per slider do not fit, the page shows the current output
and says that the controls move only in the lab.
"""

from __future__ import annotations

import base64
import html
import itertools
import math
import os

import ipywidgets as widgets
import numpy as np

from course_lib.widgets.embed import embedded_html, markdown_html, with_static_copy

SITE_ENV = "COURSE_SITE_CONTROLS"
SLIDER_ENV = "COURSE_SITE_SLIDER_POSITIONS"
_CHOICES = (widgets.Dropdown, widgets.Select, widgets.RadioButtons, widgets.ToggleButtons)
LAB_ONLY_NOTE = ("This output is shown for the controls' current values: there are too many "
                 "combinations to save them all in the page. Move the controls in the lab "
                 "(<code>make lab</code>).")


def _label(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def control_values(widget: widgets.Widget) -> tuple[str, list[object], list[str]]:
    """The kind of input the site draws for ``widget`` and every value it can take, with the
    labels shown for them."""
    if isinstance(widget, widgets.Checkbox):
        return "checkbox", [False, True], ["off", "on"]
    if isinstance(widget, _CHOICES + (widgets.SelectionSlider,)):
        kind = "range" if isinstance(widget, widgets.SelectionSlider) else "select"
        return kind, list(widget._options_values), list(widget._options_labels)
    if isinstance(widget, widgets.FloatLogSlider):
        exponents = np.arange(widget.min, widget.max + widget.step / 2, widget.step)
        values = [float(widget.base ** e) for e in exponents]
    elif isinstance(widget, widgets.IntSlider):
        values = list(range(widget.min, widget.max + 1, widget.step))
    elif isinstance(widget, widgets.FloatSlider):
        values = [float(v) for v in np.arange(widget.min, widget.max + widget.step / 2,
                                              widget.step)]
    else:
        raise TypeError(f"interact() takes sliders, drop-downs and check boxes, got "
                        f"{type(widget).__name__}")
    return "range", values, [_label(v) for v in values]


def _closest(values: list[object], value: object) -> int:
    if value in values:
        return values.index(value)
    return int(np.argmin([abs(float(v) - float(value)) for v in values]))


def site_choices(controls: dict[str, widgets.Widget], budget: int,
                 most_per_slider: int | None = None) -> list[dict] | None:
    """For each control, the indices of the values the site saves: all of a drop-down's or a
    check box's, evenly spaced ones of a slider's (its current value among them), as many as
    the budget of combinations allows and at most ``most_per_slider`` (at least 2). None when
    two per slider do not fit."""
    if most_per_slider is not None and (isinstance(most_per_slider, bool)
                                        or not isinstance(most_per_slider, int)
                                        or most_per_slider < 2):
        raise ValueError(f"most_per_slider must be a whole number of at least 2 (a slider "
                         f"the site moves shows two positions or more), got {most_per_slider!r}")
    spec = {name: control_values(widget) for name, widget in controls.items()}
    fixed = math.prod(len(v) for kind, v, _ in spec.values() if kind != "range")
    sliders = [len(v) for kind, v, _ in spec.values() if kind == "range"]
    most = min(max(sliders, default=2), most_per_slider or math.inf)
    per_slider = next((k for k in range(most, 1, -1)
                       if fixed * math.prod(min(n, k) for n in sliders) <= budget), None)
    if fixed > budget or (sliders and per_slider is None):
        return None
    choices = []
    for name, (kind, values, labels) in spec.items():
        current = _closest(values, controls[name].value)
        values[current] = controls[name].value  # the lab's starting value, exactly
        keep = list(range(len(values)))
        if kind == "range" and len(values) > per_slider:
            keep = sorted({int(i) for i in np.linspace(0, len(values) - 1, per_slider).round()})
            nearest = min(range(len(keep)), key=lambda i: abs(keep[i] - current))
            keep[nearest] = current
            keep = sorted(set(keep))
        choices.append({"name": name, "label": controls[name].description or name,
                        "kind": kind, "values": [values[i] for i in keep],
                        "labels": [labels[i] for i in keep], "default": keep.index(current),
                        "thinned": len(keep) < len(values)})
    return choices


def _output_html(captured, alt: str) -> str:
    """The outputs of one call as HTML: figures (with the text alternative their metadata
    carries, course_lib.figure_text, else ``alt``), Markdown (tables included), text."""
    parts = [f"<pre>{html.escape(captured.stdout)}</pre>"] if captured.stdout.strip() else []
    for output in captured.outputs:
        data = output.data
        if "image/png" in data:
            png = data["image/png"]
            png = png if isinstance(png, str) else base64.b64encode(png).decode()
            text = output.metadata.get("alt") or alt
            parts.append(f'<img src="data:image/png;base64,{png}" alt="{html.escape(text)}">')
        elif "text/html" in data:
            parts.append(data["text/html"])
        elif "text/markdown" in data:
            parts.append(markdown_html(data["text/markdown"]))
        elif "text/plain" in data:
            parts.append(f"<pre>{html.escape(data['text/plain'])}</pre>")
    return "".join(parts)


def run_captured(function, values: dict, alt: str) -> str:
    """Call ``function(**values)`` and return what it displayed, as HTML."""
    import matplotlib.pyplot as plt
    from IPython.utils.capture import capture_output
    from ipywidgets.widgets.interaction import show_inline_matplotlib_plots

    with capture_output() as captured:
        function(**values)
        show_inline_matplotlib_plots()
    plt.close("all")
    return _output_html(captured, alt)


def static_copy(function, controls: dict[str, widgets.Widget], fixed: dict,
                budget: int, most_per_slider: int | None = None) -> str:
    """The site's copy of an ``interact`` call (see the module docstring)."""
    choices = site_choices(controls, budget, most_per_slider)
    if choices is None:
        current = {name: widget.value for name, widget in controls.items()}
        return (f'<p class="course-control-note">{LAB_ONLY_NOTE}</p>'
                + run_captured(function, {**fixed, **current}, "the output for the "
                               "controls' current values"))
    outputs = {}
    for combination in itertools.product(*(range(len(c["values"])) for c in choices)):
        values = {c["name"]: c["values"][i] for c, i in zip(choices, combination, strict=True)}
        alt = "figure for " + ", ".join(f"{c['label']} = {c['labels'][i]}"
                                        for c, i in zip(choices, combination, strict=True))
        outputs[",".join(map(str, combination))] = run_captured(function, {**fixed, **values},
                                                                alt)
    note = ("On this page the controls show outputs saved when the site was built"
            + (", for evenly spaced positions of each slider"
               if any(c["thinned"] for c in choices) else "")
            + "; in the lab (make lab) the kernel draws them for any value.")
    data = {"note": note, "outputs": outputs,
            "controls": [{"name": c["name"], "label": c["label"], "kind": c["kind"],
                          "values": c["labels"], "default": c["default"]} for c in choices]}
    return embedded_html("control", data)


class SiteInteractive(widgets.interactive):
    """ipywidgets' ``interactive``, whose output also holds the site's static copy."""

    def __init__(self, function, site_copy: str | None, **kwargs):
        super().__init__(function, **kwargs)
        self._site_copy = site_copy

    def _repr_mimebundle_(self, **kwargs):
        return with_static_copy(super()._repr_mimebundle_(**kwargs), self._site_copy)


def interact(function=None, **controls):
    """Show ``function``'s output with a control for each keyword (sliders, drop-downs, check
    boxes; ``widgets.fixed`` values pass through), as ``ipywidgets.interact`` does; the site
    build also saves the output for each value (module docstring). Usable as a decorator."""
    if function is None:
        return lambda f: interact(f, **controls)
    from IPython.display import display

    inputs = {k: v for k, v in controls.items() if isinstance(v, widgets.ValueWidget)
              and not isinstance(v, widgets.fixed)}
    fixed = {k: (v.value if isinstance(v, widgets.fixed) else v) for k, v in controls.items()
             if k not in inputs}
    budget = int(os.environ.get(SITE_ENV, "0") or 0)
    most_per_slider = int(os.environ.get(SLIDER_ENV, "0") or 0) or None
    site_copy = static_copy(function, inputs, fixed, budget, most_per_slider) \
        if budget > 0 else None
    display(SiteInteractive(function, site_copy, **controls))
    return function
