"""Lesson 01's first example: users' tastes and films' features as vectors, so that a dot
product predicts how much a user will like a film."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from course_lib.nn.similarity import cosine_matrix, preference_scores


@dataclass(frozen=True)
class TasteExample:
    """Hand-made users and movies described by the same F features (values in [-1, 1]).

    ``user_tastes[u, f]``: how much user u likes feature f (negative: dislikes it);
    ``movie_features[m, f]``: how much movie m has feature f.
    """

    users: tuple[str, ...]
    movies: tuple[str, ...]
    features: tuple[str, ...]
    user_tastes: torch.Tensor  # (U, F)
    movie_features: torch.Tensor  # (M, F)

    def scores(self) -> torch.Tensor:
        """``U Mᵀ``, shape (U, M)."""
        return preference_scores(self.user_tastes, self.movie_features)

    def cosines(self) -> torch.Tensor:
        """Cosine of every user with every movie, shape (U, M): direction only, no magnitude."""
        return cosine_matrix(self.user_tastes, self.movie_features)


def taste_example() -> TasteExample:
    """Four users and five movies over the features action, romance, comedy, sci-fi.

    Ana likes action and science fiction, Ben romance and comedy, Chloé comedy but not action;
    Dev likes everything a bit and says so loudly (a long vector): the dot product ranks every
    movie high for Dev, the cosine does not.
    """
    features = ("action", "romance", "comedy", "sci-fi")
    users = ("Ana", "Ben", "Chloé", "Dev")
    user_tastes = torch.tensor([
        [0.9, -0.4, 0.1, 0.8],   # Ana
        [-0.3, 0.9, 0.7, -0.2],  # Ben
        [-0.8, 0.3, 0.9, 0.0],   # Chloé
        [1.6, 1.4, 1.5, 1.6],    # Dev
    ])
    movies = ("Star Raiders", "Paris in Spring", "Laugh Factory", "Robot Heart", "Heist Night")
    movie_features = torch.tensor([
        [0.9, 0.1, 0.1, 1.0],    # Star Raiders
        [0.0, 1.0, 0.3, 0.0],    # Paris in Spring
        [0.1, 0.2, 1.0, 0.0],    # Laugh Factory
        [0.2, 0.8, 0.2, 0.9],    # Robot Heart
        [1.0, 0.0, 0.5, 0.1],    # Heist Night
    ])
    return TasteExample(users, movies, features, user_tastes, movie_features)
