"""Abstract sentences of the translation corpus, their realisation in English and French with
pyrealb, and their gold word alignments.

A :class:`Sampler` draws one abstract :class:`Sentence` (clauses with subjects, verbs, objects,
adjectives, places, relative clauses, tenses, negation and coordination) whose meanings are
sensible and whose length is near a target; :func:`_realise` writes it in either language, with
French agreement and adjective order; :func:`align` locates every content word in both token
sequences. :mod:`course_lib.data.corpus` builds the corpus from these pieces.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from course_lib.data import lexicon as lex

TOKEN = re.compile(r"\w+'|[\w-]+|[^\w\s]")
# French adjectives that change form before a vowel ("vieil homme", "bel oiseau").
FRENCH_VARIANTS = {"vieux": ("vieil",), "beau": ("bel",), "nouveau": ("nouvel",)}
MAX_CLAUSES = 6


def tokenize(text: str) -> list[str]:
    """Lowercase and split off punctuation; French elisions stay with their word (``l'``)."""
    return TOKEN.findall(text.lower())


def word_count(tokens: Sequence[str]) -> int:
    return sum(1 for token in tokens if token[0].isalnum())


# Abstract sentences


@dataclass
class NounPhrase:
    noun: lex.Noun
    plural: bool
    definite: bool
    adjectives: list[lex.Adjective] = field(default_factory=list)
    relative: Clause | None = None  # a subject relative: "that eats the bread"


@dataclass
class Clause:
    subject: NounPhrase | None  # None inside a relative clause
    verb: lex.Verb
    obj: NounPhrase | None
    place: NounPhrase | None
    tense: str
    negated: bool


@dataclass
class Sentence:
    clauses: list[Clause]
    conjunction: str


# Sampling with sensible meanings and a target length


class Sampler:
    """Draws abstract sentences from a ``random.Random``; nothing else is random."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def noun(self, kinds: frozenset[str]) -> lex.Noun:
        return self.rng.choice([n for n in lex.NOUNS if n.kind in kinds])

    def noun_phrase(self, kinds: frozenset[str]) -> NounPhrase:
        return NounPhrase(self.noun(kinds), plural=self.rng.random() < 0.3,
                          definite=self.rng.random() < 0.7)

    def clause(self, subject_kinds: frozenset[str] | None = None, relative: bool = False):
        verbs = [v for v in lex.VERBS if subject_kinds is None or v.subjects & subject_kinds]
        verb = self.rng.choice(verbs)
        subject = None if relative else self.noun_phrase(verb.subjects)
        obj = self.noun_phrase(verb.objects) if verb.transitive else None
        return Clause(subject, verb, obj, None, self.rng.choice(list(lex.TENSES)),
                      negated=not relative and self.rng.random() < 0.2)

    def sentence(self, target_words: int) -> Sentence:
        sentence = Sentence([self.clause()], self.rng.choice(list(lex.CONJUNCTIONS)))
        while estimated_words(sentence) < target_words:
            if not self.expand(sentence, target_words - estimated_words(sentence)):
                break
        return sentence

    def expand(self, sentence: Sentence, missing: int) -> bool:
        """Grow the sentence by one element; small steps when close to the target."""
        options = []
        phrases = [np for np in noun_phrases(sentence)]
        for np in phrases:
            if len(np.adjectives) < 2 and fitting_adjectives(np):
                options.append(("adjective", np))
        for clause in all_clauses(sentence):
            if clause.place is None and not clause.verb.transitive:
                options.append(("place", clause))
        if missing >= 4:
            for np in phrases:
                kinds = frozenset({np.noun.kind})
                if (np.relative is None and np in top_level_phrases(sentence)
                        and any(v.subjects & kinds for v in lex.VERBS)):
                    options.append(("relative", np))
        if missing >= 4 and len(sentence.clauses) < MAX_CLAUSES:
            options.append(("clause", None))
        if not options:
            return False
        kind, target = self.rng.choice(options)
        if kind == "adjective":
            used = {a.kind for a in target.adjectives}
            choices = [a for a in fitting_adjectives(target) if a.kind not in used]
            if not choices:
                return False
            target.adjectives.append(self.rng.choice(choices))
            target.adjectives.sort(key=lambda a: lex.ADJECTIVE_ORDER.index(a.kind))
        elif kind == "place":
            target.place = self.noun_phrase(frozenset({lex.PLACE}))
        elif kind == "relative":
            target.relative = self.clause(frozenset({target.noun.kind}), relative=True)
        else:
            sentence.clauses.append(self.clause())
        return True


def fitting_adjectives(np: NounPhrase) -> list[lex.Adjective]:
    return [a for a in lex.ADJECTIVES if np.noun.kind in a.fits]


def all_clauses(sentence: Sentence) -> list[Clause]:
    found = []
    for clause in sentence.clauses:
        found.append(clause)
        for np in clause_phrases(clause):
            if np.relative is not None:
                found.append(np.relative)
    return found


def clause_phrases(clause: Clause) -> list[NounPhrase]:
    return [np for np in (clause.subject, clause.obj, clause.place) if np is not None]


def top_level_phrases(sentence: Sentence) -> list[NounPhrase]:
    return [np for clause in sentence.clauses for np in clause_phrases(clause)]


def noun_phrases(sentence: Sentence) -> list[NounPhrase]:
    return [np for clause in all_clauses(sentence) for np in clause_phrases(clause)]


def _np_words(np: NounPhrase) -> int:
    determiner = 0 if (np.plural and not np.definite) else 1
    relative = 1 + _vp_words(np.relative) if np.relative else 0
    return determiner + len(np.adjectives) + 1 + relative


def _vp_words(clause: Clause) -> int:
    verb = 3 if clause.negated else (2 if clause.tense == "future" else 1)
    words = verb + (_np_words(clause.obj) if clause.obj else 0)
    return words + (1 + _np_words(clause.place) if clause.place else 0)


def estimated_words(sentence: Sentence) -> int:
    """English word count without realising (exact for the constructions used here)."""
    clauses = sum(_np_words(c.subject) + _vp_words(c) for c in sentence.clauses)
    return clauses + (1 if len(sentence.clauses) > 1 else 0)


# Realisation with pyrealb


@functools.lru_cache(maxsize=1)
def _pyrealb():
    import pyrealb

    return pyrealb


def _english_np(np: NounPhrase):
    p = _pyrealb()
    parts = [p.D("the" if np.definite else "a")]
    parts += [p.A(a.en) for a in np.adjectives]
    parts.append(p.N(np.noun.en).n("p" if np.plural else "s"))
    if np.relative is not None:
        parts.append(p.SP(p.Pro("that"), _verb_phrase(np.relative, "en")))
    return p.NP(*parts)


def _french_np(np: NounPhrase):
    p = _pyrealb()
    # pyrealb puts "pre" adjectives (grand, beau...) before the noun by itself, but only when
    # they follow it directly; with a multi-word noun the order is given explicitly.
    pre = [p.A(a.fr) for a in np.adjectives if _french_adjective_first(a.fr)]
    post = [p.A(a.fr) for a in np.adjectives if not _french_adjective_first(a.fr)]
    parts = [p.D("le" if np.definite else "un"), *pre,
             p.N(np.noun.fr).n("p" if np.plural else "s")]
    if np.noun.fr_tail:
        preposition, head = np.noun.fr_tail.split()
        parts.append(p.PP(p.P(preposition), p.NP(p.N(head))))
    parts += post
    if np.relative is not None:
        parts.append(p.SP(p.Pro("qui"), _verb_phrase(np.relative, "fr")))
    return p.NP(*parts)


@functools.cache
def _french_adjective_first(lemma: str) -> bool:
    """True for adjectives French puts before the noun (pyrealb's lexicon decides)."""
    p = _pyrealb()
    p.loadFr()
    return p.NP(p.D("le"), p.N("chat"), p.A(lemma)).realize().split()[1] != "chat"


def _noun_phrase(np: NounPhrase, language: str):
    return _english_np(np) if language == "en" else _french_np(np)


def _verb_phrase(clause: Clause, language: str):
    """V [object] [in/dans place], in the clause's tense for ``language``."""
    p = _pyrealb()
    side = 0 if language == "en" else 1
    parts = [p.V(clause.verb.en if side == 0 else clause.verb.fr)]
    if clause.obj is not None:
        parts.append(_noun_phrase(clause.obj, language))
    if clause.place is not None:
        parts.append(p.PP(p.P(lex.LOCATIVE[side]), _noun_phrase(clause.place, language)))
    return p.VP(*parts).t(lex.TENSES[clause.tense][side])


def _realise(sentence: Sentence, language: str) -> str:
    p = _pyrealb()
    (p.loadEn if language == "en" else p.loadFr)()
    side = 0 if language == "en" else 1
    conjunction = sentence.conjunction if side == 0 else lex.CONJUNCTIONS[sentence.conjunction]
    clauses = []
    for clause in sentence.clauses:
        s = p.S(_noun_phrase(clause.subject, language), _verb_phrase(clause, language))
        s = s.t(lex.TENSES[clause.tense][side])
        clauses.append(s.typ({"neg": True}) if clause.negated else s)
    whole = clauses[0] if len(clauses) == 1 else p.S(p.CP(p.C(conjunction), *clauses))
    return whole.realize().strip()


# Gold alignments


@functools.cache
def _form(language: str, kind: str, lemma: str, features: tuple) -> tuple[str, ...]:
    """The tokens of one content word as realised with ``features``, e.g. ('pommes', 'de', ...)."""
    p = _pyrealb()
    (p.loadEn if language == "en" else p.loadFr)()
    if kind == "noun":
        (number,) = features
        return tuple(tokenize(p.N(lemma).n(number).realize()))
    if kind == "adjective":
        gender, number = features
        element = p.A(lemma) if language == "en" else p.A(lemma).g(gender).n(number)
        return tuple(tokenize(element.realize()))
    tense, number, negated = features
    phrase = p.VP(p.V(lemma)).t(tense).n(number).pe(3)
    if negated and language == "en":  # "does not eat": the lexical verb is the bare form
        phrase = phrase.typ({"neg": True})
    return tuple(tokenize(phrase.realize()))[-1:]  # the lexical verb, not its auxiliaries


def _concepts(sentence: Sentence) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """English and French token forms of every content word, in English order."""
    found = []

    def add_np(np: NounPhrase) -> None:
        number = "p" if np.plural else "s"
        for a in np.adjectives:
            found.append((_form("en", "adjective", a.en, ("m", number)),
                          _form("fr", "adjective", a.fr, (np.noun.gender, number))))
        french = _form("fr", "noun", np.noun.fr, (number,)) + tuple(np.noun.fr_tail.split())
        found.append((_form("en", "noun", np.noun.en, (number,)), french))
        if np.relative is not None:
            add_clause(np.relative, number)

    def add_clause(clause: Clause, number: str) -> None:
        en_tense, fr_tense = lex.TENSES[clause.tense]
        found.append((_form("en", "verb", clause.verb.en, (en_tense, number, clause.negated)),
                      _form("fr", "verb", clause.verb.fr, (fr_tense, number, False))))
        for np in (clause.obj, clause.place):
            if np is not None:
                add_np(np)

    for clause in sentence.clauses:
        add_np(clause.subject)
        add_clause(clause, "p" if clause.subject.plural else "s")
    return found


def _find(tokens: list[str], form: tuple[str, ...], used: set[int]) -> list[int] | None:
    """Positions of the first unused occurrence of ``form`` (or a close variant) in ``tokens``."""
    variants = [form] + [(v,) + form[1:] for v in FRENCH_VARIANTS.get(form[0], ())]
    for candidate in variants:
        size = len(candidate)
        for start in range(len(tokens) - size + 1):
            span = list(range(start, start + size))
            if tuple(tokens[start:start + size]) == candidate and not used & set(span):
                return span
    if len(form) > 1:
        return None
    head = form[0]  # participle agreement and the like: a shared stem of all but two letters
    for position, token in enumerate(tokens):
        if position not in used and len(head) > 3 and token[:len(head) - 2] == head[:-2] \
                and abs(len(token) - len(head)) <= 2:
            return [position]
    return None


def align(sentence: Sentence, en_tokens: list[str], fr_tokens: list[str]) -> list[list[list[int]]]:
    """Gold alignments: ``[[english positions], [french positions]]`` per content word found."""
    pairs, used_en, used_fr = [], set(), set()
    for en_form, fr_form in _concepts(sentence):
        en_span = _find(en_tokens, en_form, used_en)
        fr_span = _find(fr_tokens, fr_form, used_fr)
        if en_span is None or fr_span is None:
            continue
        used_en.update(en_span)
        used_fr.update(fr_span)
        pairs.append([en_span, fr_span])
    return pairs


