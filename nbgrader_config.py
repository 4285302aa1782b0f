"""nbgrader's configuration for this course, so plain `nbgrader ...` commands run from this folder
agree with `course assign` and `course grade` (source: solutions/, release: exercises/)."""

from course_lib.grading.config import nbgrader_config

c = get_config()  # noqa: F821 - provided by nbgrader when it loads this file
c.merge(nbgrader_config())
c.CourseDirectory.db_url = "sqlite:///gradebook.db"
