"""``course assign`` and ``course grade`` on nbgrader: :mod:`assign` (``exercises/`` from
``solutions/``), :mod:`grade` (the batch), :mod:`unit` (one student's lesson folder into rows
and pages), :mod:`submission` (a folder checked and staged; statuses in words) and :mod:`runs`
(each run's nonce beside the gradebook)."""
