"""Course tooling: the ``course`` command, environment check, syllabus, site and slides."""
