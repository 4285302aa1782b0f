"""The bilingual lexicon of the translation corpus, with semantic classes.

Each verb says which classes of subject and object make sense (animals and people eat food,
people read books), so sampled sentences mean something. French genders and multi-word French
forms ("pomme de terre") are given here; pyrealb does the inflection and agreement.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Noun:
    en: str
    fr: str  # head noun; a multi-word French form adds ``fr_tail`` ("de terre")
    gender: str  # "m" or "f"
    kind: str  # semantic class
    fr_tail: str = ""


@dataclass(frozen=True)
class Adjective:
    en: str
    fr: str
    kind: str  # ordering class in English: quality < size < age < colour
    fits: frozenset[str]  # noun classes it describes sensibly


@dataclass(frozen=True)
class Verb:
    en: str
    fr: str
    subjects: frozenset[str]
    objects: frozenset[str] = frozenset()  # empty: intransitive

    @property
    def transitive(self) -> bool:
        return bool(self.objects)


def _set(*kinds: str) -> frozenset[str]:
    return frozenset(kinds)


PEOPLE, ANIMALS = "person", "animal"
FOOD, TEXT, THING, PLACE = "food", "text", "thing", "place"

NOUNS = (
    Noun("man", "homme", "m", PEOPLE), Noun("woman", "femme", "f", PEOPLE),
    Noun("child", "enfant", "m", PEOPLE), Noun("teacher", "professeur", "m", PEOPLE),
    Noun("doctor", "médecin", "m", PEOPLE), Noun("student", "étudiant", "m", PEOPLE),
    Noun("farmer", "fermier", "m", PEOPLE), Noun("girl", "fille", "f", PEOPLE),
    Noun("boy", "garçon", "m", PEOPLE), Noun("neighbour", "voisin", "m", PEOPLE),
    Noun("king", "roi", "m", PEOPLE), Noun("queen", "reine", "f", PEOPLE),
    Noun("cat", "chat", "m", ANIMALS), Noun("dog", "chien", "m", ANIMALS),
    Noun("horse", "cheval", "m", ANIMALS), Noun("bird", "oiseau", "m", ANIMALS),
    Noun("mouse", "souris", "f", ANIMALS), Noun("cow", "vache", "f", ANIMALS),
    Noun("rabbit", "lapin", "m", ANIMALS), Noun("fox", "renard", "m", ANIMALS),
    Noun("apple", "pomme", "f", FOOD), Noun("sandwich", "sandwich", "m", FOOD),
    Noun("cake", "gâteau", "m", FOOD), Noun("cheese", "fromage", "m", FOOD),
    Noun("fish", "poisson", "m", FOOD), Noun("banana", "banane", "f", FOOD),
    Noun("carrot", "carotte", "f", FOOD), Noun("potato", "pomme", "f", FOOD, "de terre"),
    Noun("book", "livre", "m", TEXT), Noun("letter", "lettre", "f", TEXT),
    Noun("newspaper", "journal", "m", TEXT), Noun("story", "histoire", "f", TEXT),
    Noun("map", "carte", "f", TEXT),
    Noun("car", "voiture", "f", THING), Noun("table", "table", "f", THING),
    Noun("chair", "chaise", "f", THING), Noun("ball", "balle", "f", THING),
    Noun("box", "boîte", "f", THING), Noun("key", "clé", "f", THING),
    Noun("window", "fenêtre", "f", THING), Noun("door", "porte", "f", THING),
    Noun("garden", "jardin", "m", PLACE), Noun("house", "maison", "f", PLACE),
    Noun("city", "ville", "f", PLACE), Noun("park", "parc", "m", PLACE),
    Noun("school", "école", "f", PLACE), Noun("kitchen", "cuisine", "f", PLACE),
    Noun("forest", "forêt", "f", PLACE), Noun("station", "gare", "f", PLACE),
)

LIVING = _set(PEOPLE, ANIMALS)
CONCRETE = _set(PEOPLE, ANIMALS, FOOD, TEXT, THING, PLACE)
ADJECTIVE_ORDER = ("quality", "size", "age", "colour")

ADJECTIVES = (
    Adjective("red", "rouge", "colour", _set(ANIMALS, FOOD, THING, TEXT)),
    Adjective("black", "noir", "colour", _set(ANIMALS, THING, TEXT)),
    Adjective("white", "blanc", "colour", _set(ANIMALS, THING, PLACE, TEXT)),
    Adjective("green", "vert", "colour", _set(FOOD, THING, PLACE)),
    Adjective("blue", "bleu", "colour", _set(THING, TEXT)),
    Adjective("yellow", "jaune", "colour", _set(FOOD, THING)),
    Adjective("big", "grand", "size", _set(PEOPLE, ANIMALS, THING, PLACE, FOOD)),
    Adjective("small", "petit", "size", _set(PEOPLE, ANIMALS, THING, PLACE, FOOD, TEXT)),
    Adjective("old", "vieux", "age", _set(PEOPLE, ANIMALS, THING, PLACE, TEXT)),
    Adjective("young", "jeune", "age", _set(PEOPLE, ANIMALS)),
    Adjective("new", "nouveau", "age", _set(THING, TEXT, PLACE)),
    Adjective("beautiful", "beau", "quality", _set(PEOPLE, ANIMALS, THING, PLACE)),
    Adjective("good", "bon", "quality", _set(FOOD, TEXT)),
    Adjective("happy", "heureux", "quality", LIVING),
    Adjective("sad", "triste", "quality", LIVING),
    Adjective("tired", "fatigué", "quality", LIVING),
    Adjective("kind", "gentil", "quality", _set(PEOPLE, ANIMALS)),
    Adjective("long", "long", "quality", _set(TEXT)),
    Adjective("heavy", "lourd", "quality", _set(THING)),
    Adjective("fresh", "frais", "quality", _set(FOOD)),
    Adjective("hot", "chaud", "quality", _set(FOOD)),
    Adjective("cold", "froid", "quality", _set(FOOD)),
)

VERBS = (
    Verb("eat", "manger", LIVING, _set(FOOD)),
    Verb("read", "lire", _set(PEOPLE), _set(TEXT)),
    Verb("write", "écrire", _set(PEOPLE), _set(TEXT)),
    Verb("see", "voir", LIVING, CONCRETE),
    Verb("like", "aimer", LIVING, CONCRETE),
    Verb("buy", "acheter", _set(PEOPLE), _set(FOOD, TEXT, THING, ANIMALS)),
    Verb("sell", "vendre", _set(PEOPLE), _set(FOOD, TEXT, THING, ANIMALS)),
    Verb("find", "trouver", LIVING, _set(FOOD, TEXT, THING)),
    Verb("carry", "porter", LIVING, _set(FOOD, THING, TEXT)),
    Verb("open", "ouvrir", _set(PEOPLE), _set(THING, TEXT)),
    Verb("wash", "laver", _set(PEOPLE), _set(THING, ANIMALS, FOOD)),
    Verb("paint", "peindre", _set(PEOPLE), _set(THING, PLACE)),
    Verb("draw", "dessiner", _set(PEOPLE), _set(PEOPLE, ANIMALS, THING, PLACE)),
    Verb("follow", "suivre", LIVING, LIVING),
    Verb("watch", "regarder", LIVING, CONCRETE),
    Verb("help", "aider", _set(PEOPLE), LIVING),
    Verb("cook", "cuisiner", _set(PEOPLE), _set(FOOD)),
    Verb("sleep", "dormir", LIVING),
    Verb("run", "courir", LIVING),
    Verb("sing", "chanter", _set(PEOPLE)),
    Verb("walk", "marcher", LIVING),
    Verb("laugh", "rire", _set(PEOPLE)),
    Verb("swim", "nager", LIVING),
    Verb("play", "jouer", LIVING),
    Verb("work", "travailler", _set(PEOPLE)),
)

# Tenses: the course's name -> (English pyrealb tense, French pyrealb tense).
TENSES = {"present": ("p", "p"), "past": ("ps", "pc"), "future": ("f", "f")}
CONJUNCTIONS = {"and": "et", "but": "mais"}
LOCATIVE = ("in", "dans")
