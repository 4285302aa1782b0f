"""``course reproduce`` and ``course bench``: the measured experiments of the course."""
