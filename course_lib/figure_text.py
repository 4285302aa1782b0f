"""Text alternatives for the figures a lesson shows, for readers who cannot see them.

In a notebook, matplotlib's inline backend displays each figure with metadata from its
``_fetch_figure_metadata``; :func:`register` wraps that function so the metadata also holds
``alt``: the figure's own ``course_alt`` attribute where one is set (a diagram sets it from the
config it is drawn from), else :func:`describe_figure`, read from the figure (its title, and each
panel's title and axis labels). The site writes it into the page as the image's ``alt`` text.
"""

from __future__ import annotations

import re

ALT_ATTRIBUTE = "course_alt"
_registered = False
_TEX = {r"\top": "ᵀ", r"\tanh": "tanh", r"\exp": "exp", r"\log": "log", r"\ldots": "…",
        r"\cdots": "…", r"\cdot": "·", r"\times": "×", r"\to": "→", r"\sqrt": "√",
        r"\Sigma": "Σ", r"\sum": "Σ", r"\alpha": "α", r"\tau": "τ", r"\sigma": "σ",
        r"\mathrm": "", r"\text": "", r"\operatorname": "", r"\,": " ", r"\;": " ",
        r"\left": "", r"\right": ""}


def plain_text(text: str) -> str:
    """``text`` with its TeX made readable: ``$e_{tj} = v^\\top h$`` reads ``e_tj = vᵀ h``."""
    for command, replacement in _TEX.items():
        text = re.sub(re.escape(command) + r"(?![a-zA-Z])", replacement, text)
    text = re.sub(r"\\([a-zA-Z]+)", r"\1", text)  # any other command: its name
    text = re.sub(r"\^\{?ᵀ\}?", "ᵀ", text)
    return " ".join(text.replace("$", "").replace("{", "").replace("}", "").split())


def describe_figure(figure) -> str:
    """A one-paragraph description of ``figure`` from its own texts."""
    parts = []
    title = figure._suptitle.get_text() if getattr(figure, "_suptitle", None) else ""
    if title:
        parts.append(title)
    panels = [axes for axes in figure.axes if axes.get_visible() and axes.axison]
    for number, axes in enumerate(panels, 1):
        texts = [axes.get_title()]
        if axes.get_xlabel():
            texts.append(f"horizontal axis: {axes.get_xlabel()}")
        if axes.get_ylabel():
            texts.append(f"vertical axis: {axes.get_ylabel()}")
        legend = axes.get_legend()
        if legend is not None:
            texts.append("legend: " + ", ".join(t.get_text() for t in legend.get_texts()))
        text = "; ".join(t for t in texts if t)
        if text:
            parts.append(f"panel {number} of {len(panels)}: {text}" if len(panels) > 1 else text)
    described = ". ".join(parts)
    return f"Figure: {described}" if described else "Figure (no title or axis labels)"


def figure_alt(figure) -> str:
    return plain_text(getattr(figure, ALT_ATTRIBUTE, None) or describe_figure(figure))


def register() -> bool:
    """Give every figure the inline backend displays an ``alt`` text; True once done. Does
    nothing outside an IPython kernel."""
    global _registered
    if _registered:
        return True
    try:
        from IPython import get_ipython

        if get_ipython() is None:
            return False
        import matplotlib_inline.backend_inline as inline
    except ImportError:
        return False
    fetch = inline._fetch_figure_metadata

    def with_alt(figure):
        metadata = fetch(figure) or {}
        try:
            metadata = {**metadata, "alt": figure_alt(figure)}
        except Exception:  # a description must never stop a figure from showing
            pass
        return metadata or None

    inline._fetch_figure_metadata = with_alt
    _registered = True
    return True
