"""Data: the generated translation corpus, vocabularies and batching."""
