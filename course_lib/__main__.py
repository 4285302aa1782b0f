"""``python -m course_lib check`` is the same as ``course check``."""

import sys

from course_lib.course.cli import main

sys.exit(main())
