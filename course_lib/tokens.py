"""The special tokens every vocabulary starts with, and their ids.

:mod:`course_lib.data.vocab` builds vocabularies on them; they live in the core so that the
building blocks (beam search in :mod:`course_lib.nn.decoding`) use them without the data layer.
"""

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
PAD_ID, BOS_ID, EOS_ID, UNK_ID = range(4)
