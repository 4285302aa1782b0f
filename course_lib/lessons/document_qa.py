"""A document that answers questions by attention, lesson 03: every sentence of the document is
encoded as a vector first, a question is encoded the same way, and soft attention over the
sentences returns the answer stored with the best-matching one."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from course_lib.arguments import FLOATING, check_sentences, check_tensor, shape_of
from course_lib.data.sentences import tokenize
from course_lib.lessons.lookup import soft_attention
from course_lib.seeding import make_generator

STOP_WORDS = frozenset(
    "a an the is are was of in on at to as does do did what which who whom where when how ? "
    "'s".split()
)
PEOPLE = ("alice", "bruno", "chen", "dana", "emil", "farah", "goran", "hana", "ivan", "julia")
# relation: (fact template, question template, possible answers)
RELATIONS = {
    "home": ("{s} lives in {o}", "where does {s} live?",
             ("paris", "lyon", "oslo", "lima", "cairo", "delhi", "quito", "rome")),
    "job": ("{s} works as a {o}", "what does {s} work as?",
            ("baker", "pilot", "nurse", "farmer", "lawyer", "painter", "chemist", "tailor")),
    "pet": ("{s} owns a pet {o}", "which pet does {s} own?",
            ("cat", "dog", "parrot", "rabbit", "tortoise", "goldfish", "hamster", "ferret")),
    "colour": ("{s} likes the colour {o}", "which colour does {s} like?",
               ("red", "green", "blue", "yellow", "purple", "orange", "black", "white")),
    "music": ("{s} plays the {o}", "what does {s} play?",
              ("piano", "violin", "guitar", "drums", "flute", "cello", "trumpet", "harp")),
}


def content_words(text: str) -> list[str]:
    """The words :func:`~course_lib.data.sentences.tokenize` finds in ``text``, without punctuation,
    possessive ``'s`` and stop words, each stripped of a plural or third-person ``s``
    (``lives`` -> ``live``), so that a question and the sentence that answers it share words."""
    words = [word.rstrip("'") for word in tokenize(text) if word[0].isalnum()]
    content = [word for word in words if word not in STOP_WORDS and word != "s"]
    return [word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss")
            else word for word in content]


def word_vector(word: str, dim: int = 256, seed: int = 0) -> torch.Tensor:
    """A random unit vector for ``word``, the same for the same (word, dim, seed) in any order
    and any process (seeded from a CRC32 of the word, not Python's salted ``hash``).
    Random vectors in high dimension are nearly orthogonal, so different words barely match.
    Shape: (dim,), on the CPU."""
    generator = make_generator(zlib.crc32(f"{seed}:{word}".encode()))
    vector = torch.randn(dim, generator=generator)
    return vector / vector.norm()


def embed_text(text: str, dim: int = 256, seed: int = 0) -> torch.Tensor:
    """Bag-of-words sentence vector: the sum of :func:`word_vector` over :func:`content_words`'s
    words, scaled to unit length (zero for a text with no content word). Shape: (dim,)."""
    words = content_words(text)
    if not words:
        return torch.zeros(dim)
    total = torch.stack([word_vector(word, dim, seed) for word in words]).sum(dim=0)  # (d,)
    return total / total.norm()


@dataclass
class Document:
    """A generated document of facts ``"alice lives in paris"``: for fact ``i``, the key sentence
    ``key_texts[i]`` (the fact without its answer, ``"alice lives in"``), the answer
    ``answers[i]`` and a question it answers, ``questions[i]``.

    Shapes: ``keys`` (N, d), the embedded key sentences; ``values`` (N, d), the embedded answers.
    """

    facts: list[str]
    key_texts: list[str]
    answers: list[str]
    questions: list[str]
    keys: torch.Tensor
    values: torch.Tensor
    dim: int
    seed: int

    def __len__(self) -> int:
        return len(self.facts)

    def embed(self, texts: Sequence[str]) -> torch.Tensor:
        """Embed questions (a list of str, never one bare str) with the document's word vectors.
        Shape: (len(texts), d)."""
        texts = check_sentences("texts", texts)
        if not texts:
            raise ValueError("texts is empty: pass at least one text to embed")
        return torch.stack([embed_text(text, self.dim, self.seed) for text in texts])  # (Q, d)


def make_document(n_people: int = 4, relations: Sequence[str] | None = None, *,
                  dim: int = 256, seed: int = 0) -> Document:
    """Generate a document: for each of ``n_people`` people and each relation (default: all of
    :data:`RELATIONS`), one fact with an answer drawn by a seeded generator. Each item is
    encoded first, ``k_j = embed(key sentence)``, ``v_j = embed(answer)``: the step of attention
    that encodes the items (``k_j = f_enc(·)``).

    Shapes: ``keys`` and ``values`` (n_people · n_relations, dim), on the CPU.
    """
    relations = list(RELATIONS if relations is None else relations)
    unknown = [name for name in relations if name not in RELATIONS]
    if unknown or not relations:
        raise ValueError(f"relations must be a non-empty subset of {list(RELATIONS)}, "
                         f"got {relations}")
    if not 1 <= n_people <= len(PEOPLE):
        raise ValueError(f"n_people must be between 1 and {len(PEOPLE)}, got {n_people}")
    generator = make_generator(seed)
    facts, key_texts, answers, questions = [], [], [], []
    for person in PEOPLE[:n_people]:
        for name in relations:
            fact, question, choices = RELATIONS[name]
            answer = choices[int(torch.randint(len(choices), (1,), generator=generator))]
            facts.append(fact.format(s=person, o=answer))
            key_texts.append(fact.format(s=person, o="").strip())
            answers.append(answer)
            questions.append(question.format(s=person))
    keys = torch.stack([embed_text(text, dim, seed) for text in key_texts])  # (N, d)
    values = torch.stack([embed_text(answer, dim, seed) for answer in answers])  # (N, d)
    return Document(facts, key_texts, answers, questions, keys, values, dim, seed)


def document_lookup(queries: torch.Tensor, document: Document, *, temperature: float = 0.1,
                    mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Soft attention of each query over the document's sentences,
    ``a = softmax(K q / τ)``, ``output = Σ_i a_i v_i``, where the rows of ``K`` are the encoded
    key sentences and the ``v_i`` the encoded answers. Runs on the queries' device.

    Shapes: ``queries`` (B, d), ``mask`` (B, N) bool -> output (B, d), weights (B, N).
    """
    check_tensor("queries", queries, dtype=FLOATING)
    if queries.dim() != 2 or queries.shape[-1] != document.keys.shape[-1]:
        raise ValueError(f"queries must have shape (B, d) with d = {document.keys.shape[-1]}, "
                         f"got {shape_of(queries)}")
    batch = queries.shape[0]
    keys = document.keys.to(queries.device).expand(batch, -1, -1)  # (N, d) -> (B, N, d)
    values = document.values.to(queries.device).expand(batch, -1, -1)  # (N, d) -> (B, N, d)
    return soft_attention(queries, keys, values, mask=mask, temperature=temperature)


def decode_answers(outputs: torch.Tensor, document: Document) -> list[str]:
    """The document's answer whose vector is closest (cosine) to each output vector.

    Shapes: ``outputs`` (B, d) -> B strings.
    """
    names = sorted(set(document.answers))
    table = document.embed(names).to(outputs.device)  # (A, d), unit rows
    similarity = outputs @ table.T  # (B, d) @ (d, A) -> (B, A)
    return [names[i] for i in similarity.argmax(dim=-1).tolist()]


def answer_questions(questions: Sequence[str], document: Document, *,
                     temperature: float = 0.1) -> tuple[list[str], torch.Tensor]:
    """Answer questions in words: embed, attend over the document, decode the nearest answer.

    Returns the answers and the attention weights (len(questions), N) for plotting.
    """
    questions = check_sentences("questions", questions)
    outputs, weights = document_lookup(document.embed(questions), document,
                                       temperature=temperature)
    return decode_answers(outputs, document), weights
