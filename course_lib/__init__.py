"""course_lib: the tested package behind *Attention, from dot products to Transformers*.

Import the pieces from their modules (``from course_lib.device import get_device``); this file
stays light so that ``course check`` can report a broken environment (say, torch missing)
instead of failing on import.
"""

__version__ = "0.1.0"
KERNEL_NAME = "attention-course"


def _describe_figures() -> None:
    # in a notebook, every figure is displayed with a text alternative (figure_text.py)
    import sys

    if "IPython" in sys.modules:
        from course_lib.figure_text import register

        register()


_describe_figures()
