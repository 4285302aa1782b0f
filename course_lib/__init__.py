"""course_lib: the tested package behind *Attention, from dot products to Transformers*.

Import the pieces from their modules (``from course_lib.device import get_device``); this file
stays light so that ``course check`` can report a broken environment (say, torch missing)
instead of failing on import.
"""

__version__ = "0.1.0"
KERNEL_NAME = "attention-course"
