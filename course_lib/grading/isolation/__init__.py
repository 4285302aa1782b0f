"""A submission executed isolated: :mod:`sandbox` starts the runner (``course_lib.grading.runner``)
in bubblewrap and reads its answer; :mod:`budget` caps the memory, processes, disk and time of
the whole run."""
