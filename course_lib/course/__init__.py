"""Course tooling: the ``course`` command, environment check, notebook hygiene, syllabus."""
