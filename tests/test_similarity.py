"""course_lib.nn.similarity and data.glove: exact agreement with PyTorch, the properties the
lesson claims, the real
GloVe vectors, and clear errors on bad input."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_lib.data.glove import (
    GLOVE_VOCAB_SIZE,
    WordVectors,
    analogy,
    load_glove,
    nearest_neighbours,
)
from course_lib.lessons.tastes import taste_example
from course_lib.nn.similarity import (
    cosine_matrix,
    cosine_similarity,
    embedding_lookup,
    entropy,
    one_hot,
    one_hot_lookup,
    output_distribution,
    pca_project,
    predict_word,
    preference_scores,
    softmax_with_temperature,
    top_k_words,
)

SMALL = 20_000  # most frequent GloVe words: every word these tests use, in a fraction of the time


def generator(seed=0):
    return torch.Generator().manual_seed(seed)


@pytest.fixture(scope="module")
def glove():
    return load_glove(SMALL)


# --- one-hot vectors and lookups ------------------------------------------------------------


def test_one_hot_has_a_single_one_per_row():
    x = one_hot(torch.tensor([2, 0, 3]), 4)
    assert x.dtype == torch.float32
    assert torch.equal(x, torch.tensor([[0.0, 0, 1, 0], [1, 0, 0, 0], [0, 0, 0, 1]]))
    assert one_hot(torch.tensor([[1, 2]]), 3, dtype=torch.float64).shape == (1, 2, 3)


def test_one_hot_lookup_is_exactly_indexing_and_nn_embedding():
    table = torch.randn(11, 7, generator=generator())
    ids = torch.randint(0, 11, (4, 5), generator=generator(1))  # (B, T)
    looked_up = one_hot_lookup(table, ids)
    assert looked_up.shape == (4, 5, 7)
    assert torch.equal(looked_up, table[ids])  # bit for bit: one-hot @ E == E[i]
    assert torch.equal(embedding_lookup(table, ids), table[ids])
    layer = torch.nn.Embedding.from_pretrained(table)
    assert torch.equal(looked_up, layer(ids))


def test_one_hot_lookup_in_double_precision_and_single_index():
    table = torch.randn(5, 3, dtype=torch.float64, generator=generator())
    assert torch.equal(one_hot_lookup(table, torch.tensor(4)), table[4])


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda: one_hot(torch.tensor([0, 5]), 5), IndexError, r"\[0, 4\].*5 words.*0 to 5"),
    (lambda: one_hot(torch.tensor([-1]), 5), IndexError, r"\[0, 4\]"),
    (lambda: one_hot(torch.tensor([0.0]), 5), TypeError, "integer tensor.*float32"),
    (lambda: one_hot([0, 1], 5), TypeError, "torch.Tensor, got list"),
    (lambda: one_hot(torch.tensor([0]), 0), ValueError, "positive int, got 0"),
    (lambda: one_hot_lookup(torch.zeros(3, 2), torch.tensor([3])), IndexError, r"\[0, 2\]"),
    (lambda: one_hot_lookup(torch.zeros(3), torch.tensor([0])), ValueError,
     r"2-D matrix \(V, d\), got shape \(3,\)"),
    (lambda: embedding_lookup(torch.zeros(3, 2, dtype=torch.long), torch.tensor([0])),
     TypeError, "floating-point"),
])
def test_lookup_errors_name_what_was_expected(call, error, message):
    with pytest.raises(error, match=message):
        call()


# --- similarity -----------------------------------------------------------------------------


def test_cosine_matches_pytorch():
    a = torch.randn(8, 50, generator=generator(2))
    b = torch.randn(8, 50, generator=generator(3))
    torch.testing.assert_close(cosine_similarity(a, b), F.cosine_similarity(a, b, dim=-1),
                               rtol=1e-6, atol=1e-6)
    left, right = a[:3, None, :], b[None, :5, :]  # broadcast (3, 1, d) with (1, 5, d)
    torch.testing.assert_close(cosine_similarity(left, right),
                               F.cosine_similarity(left, right, dim=-1), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(cosine_matrix(a[:3], b[:5]),
                               F.cosine_similarity(left, right, dim=-1), rtol=1e-6, atol=1e-6)


def test_cosine_properties():
    a = torch.tensor([[3.0, 4.0], [1.0, 0.0], [0.0, 0.0]])
    b = torch.tensor([[6.0, 8.0], [-2.0, 0.0], [1.0, 1.0]])
    # parallel -> 1, opposite -> -1, zero vector -> 0 (never NaN)
    torch.testing.assert_close(cosine_similarity(a, b), torch.tensor([1.0, -1.0, 0.0]))
    scaled = cosine_similarity(a[:2] * 7.5, b[:2])
    torch.testing.assert_close(scaled, cosine_similarity(a[:2], b[:2]))  # length is ignored
    x = torch.randn(6, 4, generator=generator(4))
    torch.testing.assert_close(torch.diagonal(cosine_matrix(x, x)), torch.ones(6))


@pytest.mark.parametrize("call", [
    lambda: cosine_similarity(torch.ones(2, 3), torch.ones(2, 4)),
    lambda: cosine_matrix(torch.ones(2, 3), torch.ones(5, 4)),
    lambda: preference_scores(torch.ones(2, 3), torch.ones(5, 4)),
])
def test_different_vector_sizes_are_refused(call):
    with pytest.raises(ValueError, match=r"same vector size d.*\(2, 3\).*\(\d, 4\)"):
        call()


def test_preference_scores_are_dot_products():
    users = torch.randn(3, 4, generator=generator(5))
    movies = torch.randn(6, 4, generator=generator(6))
    expected = torch.einsum("uf,mf->um", users, movies)
    torch.testing.assert_close(preference_scores(users, movies), expected)


def test_taste_example_tells_the_dot_versus_cosine_story():
    ex = taste_example()
    scores, cosines = ex.scores(), ex.cosines()
    assert scores.shape == cosines.shape == (len(ex.users), len(ex.movies))
    assert ex.user_tastes.shape[1] == ex.movie_features.shape[1] == len(ex.features)
    favourite = {ex.users[u]: ex.movies[int(scores[u].argmax())] for u in range(3)}
    assert favourite == {"Ana": "Star Raiders", "Ben": "Paris in Spring",
                         "Chloé": "Laugh Factory"}
    dev = ex.users.index("Dev")
    assert (scores.argmax(dim=0) == dev).all(), "the loud user wins every movie on dot product"
    assert not (cosines.argmax(dim=0) == dev).all(), "but not on the cosine"


# --- softmax with a temperature -------------------------------------------------------------


def test_softmax_with_temperature_matches_definition_and_sums_to_one():
    scores = torch.randn(4, 9, generator=generator(7))
    for temperature in (0.1, 0.5, 1.0, 3.0):
        probs = softmax_with_temperature(scores, temperature)
        torch.testing.assert_close(probs.sum(dim=-1), torch.ones(4))
        torch.testing.assert_close(probs, torch.softmax(scores / temperature, dim=-1))
    torch.testing.assert_close(softmax_with_temperature(scores), torch.softmax(scores, dim=-1))
    torch.testing.assert_close(softmax_with_temperature(scores, 2.0, dim=0).sum(dim=0),
                               torch.ones(9))


def test_temperature_limits_one_hot_and_uniform():
    scores = torch.tensor([[1.0, 3.0, 2.0, -1.0], [0.5, 0.1, 0.2, 0.49]])
    cold = softmax_with_temperature(scores, 1e-4)  # the closest pair is 0.01 apart
    torch.testing.assert_close(cold, F.one_hot(scores.argmax(dim=-1), 4).float(),
                               rtol=0, atol=1e-6)
    hot = softmax_with_temperature(scores, 1e6)
    torch.testing.assert_close(hot, torch.full((2, 4), 0.25), rtol=0, atol=1e-5)
    ties = softmax_with_temperature(torch.tensor([2.0, 2.0, 0.0]), 1e-3)
    torch.testing.assert_close(ties, torch.tensor([0.5, 0.5, 0.0]))


def test_entropy_grows_with_temperature():
    scores = torch.randn(20, generator=generator(8))
    values = [float(entropy(softmax_with_temperature(scores, t)))
              for t in (0.05, 0.2, 1.0, 5.0, 50.0)]
    assert values == sorted(values)
    assert values[-1] < math.log(20) + 1e-6
    assert float(entropy(torch.tensor([0.0, 1.0, 0.0]))) == 0.0
    torch.testing.assert_close(entropy(torch.full((8,), 1 / 8)), torch.tensor(math.log(8)))


@pytest.mark.parametrize(("temperature", "error", "message"), [
    (0, ValueError, "finite number > 0, got 0"),
    (-1.0, ValueError, "got -1.0"),
    (float("nan"), ValueError, "got nan"),
    (float("inf"), ValueError, "got inf"),
    ("2", TypeError, "number, got str"),
    (torch.tensor(1.0), TypeError, "number, got Tensor"),
])
def test_bad_temperatures_are_refused(temperature, error, message):
    with pytest.raises(error, match=message):
        softmax_with_temperature(torch.zeros(3), temperature)


def test_integer_scores_are_refused():
    with pytest.raises(TypeError, match="scores must be a floating-point tensor, got torch.int64"):
        softmax_with_temperature(torch.tensor([1, 2]))


# --- from a hidden state to a word ----------------------------------------------------------


def test_output_distribution_is_w_h_then_softmax():
    W = torch.randn(12, 6, generator=generator(9))  # (V, d)
    h = torch.randn(3, 6, generator=generator(10))  # (B, d)
    logits, probs = output_distribution(h, W, temperature=0.7)
    assert logits.shape == probs.shape == (3, 12)
    torch.testing.assert_close(logits, torch.stack([W @ h[b] for b in range(3)]))
    torch.testing.assert_close(probs, torch.softmax(logits / 0.7, dim=-1))


def test_predict_word_is_the_argmax():
    words = ["cat", "dog", "fish"]
    W = torch.eye(3) * 2.0
    assert predict_word(torch.tensor([0.1, 0.9, 0.2]), W, words) == "dog"
    batch = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 0.3]])
    assert predict_word(batch, W, words) == ["cat", "fish"]
    with pytest.raises(ValueError, match="words has 2 entries but output_embeddings has 3"):
        predict_word(batch, W, words[:2])
    with pytest.raises(ValueError, match=r"hidden and output_embeddings.*\(2, 4\).*\(3, 3\)"):
        output_distribution(torch.ones(2, 4), W)
    with pytest.raises(ValueError, match=r"\(d,\) or \(B, d\), got shape \(1, 2, 3\)"):
        predict_word(torch.ones(1, 2, 3), W, words)


def test_top_k_words():
    scores = torch.tensor([0.1, 0.7, 0.3])
    assert top_k_words(scores, ["a", "b", "c"], k=2) == [("b", pytest.approx(0.7)),
                                                         ("c", pytest.approx(0.3))]
    assert len(top_k_words(scores, ["a", "b", "c"], k=10)) == 3
    with pytest.raises(ValueError, match=r"shape \(len\(words\),\) = \(2,\), got \(3,\)"):
        top_k_words(scores, ["a", "b"])


# --- PCA --------------------------------------------------------------------------------------


def test_pca_matches_scikit_learn_up_to_sign():
    from sklearn.decomposition import PCA

    x = torch.randn(40, 10, generator=generator(11), dtype=torch.float64)
    ours = pca_project(x, 2).numpy()
    theirs = PCA(n_components=2).fit_transform(x.numpy())
    for axis in range(2):
        sign = np.sign(ours[:, axis] @ theirs[:, axis])
        np.testing.assert_allclose(ours[:, axis], sign * theirs[:, axis], atol=1e-10)
    assert torch.equal(pca_project(x, 2), pca_project(x.clone(), 2))  # deterministic signs
    with pytest.raises(ValueError, match=r"\[1, 10\], got 11"):
        pca_project(x, 11)


# --- WordVectors and the real GloVe vectors ---------------------------------------------------


def test_glove_loads_offline_as_float32_on_cpu(glove):
    assert len(glove) == SMALL and glove.vectors.shape == (SMALL, 50) and glove.dim == 50
    assert glove.vectors.dtype == torch.float32 and glove.vectors.device.type == "cpu"
    assert glove.words[:5] == ("the", ",", ".", "of", "to")  # ordered by frequency
    # the first numbers of "the" in Stanford's glove.6B.50d.txt
    torch.testing.assert_close(glove["the"][:3], torch.tensor([0.418, 0.24968, -0.41242]))
    torch.testing.assert_close(glove.unit.norm(dim=1), torch.ones(SMALL))


def test_glove_is_cached_and_limits_are_prefixes(glove):
    assert load_glove(SMALL) is glove
    small = load_glove(100)
    assert small.words == glove.words[:100]
    assert torch.equal(small.vectors, glove.vectors[:100])


def test_full_vocabulary():
    full = load_glove()
    assert len(full) == GLOVE_VOCAB_SIZE == len(set(full.words))
    assert full.index_of("king") == 691 and full.words[-1] == "sandberger"
    assert load_glove(None) is full


@pytest.mark.parametrize("limit", [0, -5, 400_001, 1.5, True, "100"])
def test_bad_limits(limit):
    with pytest.raises(ValueError, match=r"limit must be None or an int in \[1, 400000\]"):
        load_glove(limit)


def test_king_minus_man_plus_woman_is_queen(glove):
    (word, score), *_ = analogy(glove, "king", "man", "woman", k=3)
    assert word == "queen" and score > 0.8
    assert analogy(glove, "paris", "france", "italy")[0][0] == "rome"
    assert analogy(glove, "actor", "man", "woman")[0][0] == "actress"
    assert all(w not in ("king", "man", "woman")
               for w, _ in analogy(glove, "king", "man", "woman", k=20))


def test_sensible_nearest_neighbours(glove):
    paris = [w for w, _ in nearest_neighbours(glove, "paris", k=10)]
    assert "france" in paris[:3] and "london" in paris
    assert "paris" not in paris
    numbers = {w for w, _ in nearest_neighbours(glove, "three", k=3)}
    assert numbers <= {"two", "four", "five", "six"}
    cosines = [c for _, c in nearest_neighbours(glove, "coffee", k=5)]
    assert cosines == sorted(cosines, reverse=True) and all(-1 <= c <= 1 for c in cosines)
    without = [w for w, _ in nearest_neighbours(glove, "paris", k=10, exclude=["france"])]
    assert "france" not in without and without[0] == "brussels"
    # a vector query is not excluded: its own word comes first
    assert nearest_neighbours(glove, glove["king"], k=1)[0][0] == "king"


def test_hidden_state_near_a_word_decodes_to_it(glove):
    noise = 0.2 * torch.randn(3, 50, generator=generator(12))
    hidden = glove[["paris", "king", "coffee"]] + noise  # (3, d)
    assert predict_word(hidden, glove.vectors, glove.words) == ["paris", "king", "coffee"]


def test_word_vectors_errors_and_devices(glove):
    with pytest.raises(KeyError, match="vocabulary is lower-case: try 'paris'"):
        glove["Paris"]
    with pytest.raises(KeyError, match="only the most frequent words are loaded"):
        nearest_neighbours(glove, "zsombor")
    with pytest.raises(KeyError, match="'qwxz'"):
        analogy(glove, "king", "qwxz", "woman")
    with pytest.raises(ValueError, match=r"query vector must have shape \(50,\), got \(3,\)"):
        nearest_neighbours(glove, torch.ones(3))
    with pytest.raises(ValueError, match="3 words but 2 vectors"):
        WordVectors(["a", "b", "c"], torch.zeros(2, 4))
    with pytest.raises(ValueError, match="unique"):
        WordVectors(["a", "a"], torch.zeros(2, 4))
    moved = glove.to(torch.float64)  # .to() passes anything Tensor.to accepts
    assert moved.words is glove.words and moved.vectors.dtype == torch.float64
    assert "king" in glove and "qwxz" not in glove
