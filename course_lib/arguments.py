"""Argument checks for every public function and module of course_lib that takes tensors,
lengths, indices or sentences.

Each error names the argument as the caller wrote it, says what was expected and what came,
and suggests the fix where there is an obvious one. ``TypeError``: a wrong type or dtype;
``ValueError``: a wrong shape, range or device (:class:`OutOfRangeError`, a ``ValueError`` that
is also an ``IndexError``, for ids and indices out of range). Checks that read the numbers
(ranges of ids and lengths) are skipped on the meta device, which has none.
"""

from __future__ import annotations

import math
import numbers
import operator
import reprlib
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

import torch

FLOATING, INTEGER, BOOL = "floating-point", "integer", "bool"
_KIND_TEXT = {FLOATING: "a floating-point tensor", INTEGER: "an integer tensor",
              BOOL: "a torch.bool tensor"}


class OutOfRangeError(ValueError, IndexError):
    """An id, index or length outside its allowed range."""


def shape_of(tensor: torch.Tensor) -> tuple[int, ...]:
    """``tensor.shape`` as a plain tuple, for error messages and comparisons."""
    return tuple(tensor.shape)


def _pattern(shape: Sequence[int | str | None]) -> str:
    """``(B, 8)`` for ``("B", 8)``; None reads as ``·``."""
    return "(" + ", ".join("·" if s is None else str(s) for s in shape) + (
        ",)" if len(shape) == 1 else ")")


def _has_values(tensor: torch.Tensor) -> bool:
    return tensor.device.type != "meta" and tensor.numel() > 0


def _dtype_matches(tensor: torch.Tensor, kind: str | torch.dtype) -> bool:
    if kind == FLOATING:
        return tensor.is_floating_point()
    if kind == INTEGER:
        return not (tensor.is_floating_point() or tensor.is_complex()
                    or tensor.dtype == torch.bool)
    if kind == BOOL:
        return tensor.dtype == torch.bool
    return tensor.dtype == kind


def check_tensor(name: str, value: object, *, dtype: str | torch.dtype | tuple | None = None,
                 ndim: int | tuple[int, ...] | None = None,
                 shape: Sequence[int | str | None] | None = None,
                 device: torch.device | str | None = None) -> torch.Tensor:
    """``value`` is a tensor; of the kind ``dtype`` (FLOATING, INTEGER, BOOL, a torch.dtype, or
    a tuple of them); with ``ndim`` dimensions (an int or a tuple of allowed ints); of ``shape``
    (an int must match, None or a name such as ``"B"`` matches any size); on ``device``."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if dtype is not None:
        kinds = dtype if isinstance(dtype, tuple) else (dtype,)
        if not any(_dtype_matches(value, kind) for kind in kinds):
            wanted = " or ".join(_KIND_TEXT.get(kind, f"a {kind} tensor") for kind in kinds)
            raise TypeError(f"{name} must be {wanted}, got {value.dtype}")
    if ndim is not None and value.dim() not in (ndim if isinstance(ndim, tuple) else (ndim,)):
        allowed = " or ".join(map(str, ndim if isinstance(ndim, tuple) else (ndim,)))
        raise ValueError(f"{name} must have {allowed} dimensions, got shape {shape_of(value)}")
    if shape is not None and (value.dim() != len(shape) or any(
            isinstance(want, int) and want != got
            for want, got in zip(shape, value.shape, strict=True))):
        raise ValueError(f"{name} must have shape {_pattern(shape)}, got {shape_of(value)}")
    if device is not None:
        check_device(name, value, device)
    return value


def _same_device(a: torch.device, b: torch.device) -> bool:
    return a.type == b.type and (a.index is None or b.index is None or a.index == b.index)


def check_device(name: str, tensor: torch.Tensor, device: torch.device | str,
                 other: str = "the module's parameters are") -> None:
    """``tensor`` lies on ``device``; ``other`` says whose device that is."""
    if tensor.device == device:
        return
    device = torch.device(device)
    if not _same_device(tensor.device, device):
        raise ValueError(f"{name} is on {tensor.device} but {other} on {device}; move it with "
                         f"{name}.to('{device}')")


def check_same_device(**tensors: torch.Tensor | None) -> None:
    """Every tensor given (None ones skipped) lies on the device of the first."""
    present = [(name, t) for name, t in tensors.items() if t is not None]
    if not present:
        return
    first, reference = present[0]
    for name, tensor in present[1:]:
        check_device(name, tensor, reference.device, f"{first} is")


def _autocast_on(device: torch.device) -> bool:
    try:
        return torch.is_autocast_enabled(device.type)
    except TypeError:  # torch < 2.4 takes no device type
        return torch.is_autocast_cpu_enabled() if device.type == "cpu" \
            else device.type == "cuda" and torch.is_autocast_enabled()
    except RuntimeError:  # a device type with no autocast (meta)
        return False


def check_same_dtype(**tensors: torch.Tensor | None) -> None:
    """Every tensor given (None ones skipped) has the dtype of the first, unless
    ``torch.autocast`` is on (it casts them)."""
    present = [(name, t) for name, t in tensors.items() if t is not None]
    if not present:
        return
    first, reference = present[0]
    for name, tensor in present[1:]:
        if tensor.dtype != reference.dtype and not _autocast_on(reference.device):
            raise TypeError(f"{name} has dtype {tensor.dtype} but {first} has {reference.dtype}; "
                            f"convert it with {name}.to({reference.dtype})")


def check_module_input(name: str, value: torch.Tensor, module: torch.nn.Module) -> None:
    """``value`` (floating point) lies on the device of ``module``'s parameters and, outside
    ``torch.autocast``, has their dtype."""
    parameter = next(module.parameters(), None)
    if parameter is None:
        return
    check_device(name, value, parameter.device)
    if value.dtype != parameter.dtype and not _autocast_on(value.device):
        raise TypeError(f"{name} has dtype {value.dtype} but the module's parameters are "
                        f"{parameter.dtype}; convert it with {name}.to({parameter.dtype}) (or "
                        f"the module with .to({value.dtype}))")


def check_int(name: str, value: object, *, minimum: int | None = None,
              maximum: int | None = None) -> int:
    """``value`` is an integer (not a bool, not a float) in [``minimum``, ``maximum``]."""
    if isinstance(value, bool) or isinstance(value, float):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}") from None
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        if maximum is None:
            wanted = {0: "a non-negative int", 1: "a positive int"}.get(minimum,
                                                                       f"an int >= {minimum}")
        else:
            wanted = f"an int in [{'-inf' if minimum is None else minimum}, {maximum}]"
        raise ValueError(f"{name} must be {wanted}, got {number}")
    return number


Choice = TypeVar("Choice")
_SHORT = reprlib.Repr()
_SHORT.maxstring, _SHORT.maxother = 60, 60


def _same_choice(value: object, option: object) -> bool:
    """``value`` is ``option``, or equal to it and of its type (a bool never stands for 1)."""
    return value is option or (isinstance(value, type(option)) and value == option
                               and isinstance(value, bool) == isinstance(option, bool))


def check_choice(name: str, value: Choice, choices: Iterable) -> Choice:
    """``value`` is one of ``choices`` (a tuple, a list, a set or a dict's keys), compared by
    type and equality, so that a value of another type (``True`` for ``1``, a tensor, a list)
    never matches. Returns it."""
    options = tuple(sorted(choices, key=repr) if isinstance(choices, (set, frozenset))
                    else choices)
    if any(_same_choice(value, option) for option in options):
        return value
    kinds = {type(option) for option in options}
    got = _SHORT.repr(value)
    if value is not None and type(value) not in kinds:
        got += f" ({type(value).__name__})"
    raise ValueError(f"{name} must be one of {options}, got {got}")


def check_positive_int(name: str, value: object) -> int:
    """``value`` is an int >= 1."""
    return check_int(name, value, minimum=1)


def check_positive_number(name: str, value: object, *, allow_inf: bool = False) -> float:
    """``value`` is a real number > 0, finite unless ``allow_inf`` (NaN is refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if not (value > 0 and (allow_inf or math.isfinite(value))):
        raise ValueError(f"{name} must be a {'' if allow_inf else 'finite '}number > 0, got "
                         f"{value}")
    return float(value)


def check_temperature(temperature: object, name: str = "temperature") -> float:
    """A softmax temperature is a finite number > 0."""
    return check_positive_number(name, temperature)


def _int_tensor(name: str, values: object, what: str) -> torch.Tensor:
    """A list, tuple or tensor of integers as an integer tensor (floats and bools refused)."""
    if isinstance(values, torch.Tensor):
        return check_tensor(name, values, dtype=INTEGER)
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"{name} must be a tensor or a list of {what}, got "
                        f"{type(values).__name__}")
    for position, item in enumerate(values):
        if isinstance(item, (bool, float)) or not hasattr(item, "__index__"):
            raise TypeError(f"{name} must hold integers, got {item!r} "
                            f"({type(item).__name__}) at position {position}")
    return torch.tensor([operator.index(item) for item in values], dtype=torch.long)


def check_lengths(name: str, lengths: object, max_len: int | None, minimum: int = 1, *,
                  batch: int | None = None, limit: str = "max_len") -> torch.Tensor:
    """``lengths`` is a (B,) integer tensor, list or tuple (B = ``batch`` when given) of values
    in [``minimum``, ``max_len``] (no upper bound for None); ``limit`` names ``max_len`` in the
    message. Returns it as an integer tensor."""
    lengths = _int_tensor(name, lengths, "lengths")
    if lengths.dim() != 1 or (batch is not None and lengths.shape[0] != batch):
        wanted = f"({batch},)" if batch is not None else "(B,)"
        raise ValueError(f"{name} must have shape {wanted}, one length per sequence, got "
                         f"{shape_of(lengths)}")
    if _has_values(lengths):
        low, high = torch.stack(torch.aminmax(lengths)).tolist()
        if low < minimum or (max_len is not None and high > max_len):
            bad = low if low < minimum else high
            position = (lengths == bad).nonzero()[0, 0].item()
            interval = f"[{minimum}, inf)" if max_len is None else \
                f"[{minimum}, {max_len}] ({limit})"
            raise OutOfRangeError(f"{name} must hold integers in {interval}, got {bad} at "
                                  f"position {position}")
    return lengths


def check_token_ids(name: str, ids: object, vocab_size: int, what: str = "a vocabulary",
                    unit: str = "words") -> torch.Tensor:
    """``ids`` is an integer tensor of ids in [0, ``vocab_size``); ``what`` and ``unit`` name
    the vocabulary and its entries in the message."""
    ids = check_tensor(name, ids, dtype=INTEGER)
    if _has_values(ids):
        low, high = torch.stack(torch.aminmax(ids)).tolist()
        if low < 0 or high >= vocab_size:
            raise OutOfRangeError(f"{name} must hold ids in [0, {vocab_size - 1}] ({what} of "
                                  f"{vocab_size} {unit}), got values from {low} to {high}")
    return ids


def check_model_tokens(name: str, ids: object, embedding: torch.nn.Embedding,
                       what: str = "the model's vocabulary", unit: str = "words",
                       shape: tuple[str, str] = ("B", "T")) -> torch.Tensor:
    """``ids`` is a (B, T) integer tensor (``shape`` names its dimensions) on the device of
    ``embedding``, holding ids in [0, V) for its V rows."""
    check_tensor(name, ids, dtype=INTEGER, shape=shape)
    check_device(name, ids, embedding.weight.device, "the model's parameters are")
    return check_token_ids(name, ids, embedding.num_embeddings, what, unit)


def check_index(name: str, index: object, size: int) -> int | list[int]:
    """``index`` is one position or a non-empty list (tuple, 1-D tensor) of positions in
    [0, ``size``), as into a batch or a data set of ``size`` items. Returns it as an int or a
    list of ints."""
    if isinstance(index, torch.Tensor):
        index = check_tensor(name, index, dtype=INTEGER, ndim=(0, 1)).tolist()
    if isinstance(index, Sequence) and not isinstance(index, (str, bytes)):
        if len(index) == 0:
            raise ValueError(f"{name} is empty; pass at least one position in [0, {size})")
        positions = _int_tensor(name, index, "positions").tolist()
    else:
        positions = [check_int(name, index)]
    for position in positions:
        if not 0 <= position < size:
            raise OutOfRangeError(f"{name} must hold positions in [0, {size}) ({size} items), "
                                  f"got {position}")
    return positions if isinstance(index, Sequence) else positions[0]


def check_sentences(name: str, value: object) -> list[str]:
    """``value`` is a list (or tuple) of sentences, each a str of space-separated tokens or a
    list of tokens, never one bare str. Returns the sentences as strings."""
    if isinstance(value, str):
        raise TypeError(f"{name} must be a list of sentences, got one str; pass a single "
                        f"sentence as [{name}]")
    if not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list of sentences (str or lists of tokens), got "
                        f"{type(value).__name__}")
    sentences = []
    for position, sentence in enumerate(value):
        if isinstance(sentence, str):
            sentences.append(sentence)
        elif isinstance(sentence, Sequence) and all(isinstance(t, str) for t in sentence):
            sentences.append(" ".join(sentence))
        else:
            raise TypeError(f"{name}[{position}] must be a str or a list of str tokens, got "
                            f"{type(sentence).__name__}")
    return sentences


def check_token_lists(name: str, value: object) -> list[list[str]]:
    """``value`` is a list of sentences, each a list of str tokens (not a str, which would be
    read one character at a time)."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list of token lists, got {type(value).__name__}")
    for position, tokens in enumerate(value):
        if isinstance(tokens, str):
            raise TypeError(f"{name}[{position}] must be a list of tokens, got a str; split it "
                            f"with {name}[{position}].split()")
        if not isinstance(tokens, Sequence) or not all(isinstance(t, str) for t in tokens):
            raise TypeError(f"{name}[{position}] must be a list of str tokens, got "
                            f"{type(tokens).__name__}")
    return [list(tokens) for tokens in value]


def check_pair(name: str, pair: object, keys: Sequence[str] = ("en", "fr")) -> Mapping:
    """``pair`` is a dict with a str sentence under each of ``keys``."""
    if not isinstance(pair, Mapping):
        raise TypeError(f"{name} must be a dict with the keys {list(keys)}, got "
                        f"{type(pair).__name__}")
    for key in keys:
        if key not in pair:
            raise ValueError(f"{name} has no {key!r} sentence; a pair is a dict with the keys "
                             f"{list(keys)}, got the keys {list(pair)}")
        if not isinstance(pair[key], str):
            raise TypeError(f"{name}[{key!r}] must be a str, got {type(pair[key]).__name__}")
    return pair


def _mask_hints(name: str, mask: torch.Tensor, expected: tuple[int, ...]) -> str:
    """The reshapes that give a lower-rank ``mask`` the rank of ``expected``."""
    missing = len(expected) - mask.dim()
    if missing <= 0:
        return ""
    hints = []
    if mask.dim() == 2 and shape_of(mask) == (expected[0], expected[-1]):
        hints.append(f"for a (B, S) padding mask pass {name}[:, {'None, ' * missing}:]")
    if shape_of(mask) == expected[missing:]:
        hints.append(f"for a mask shared by every leading dimension pass "
                     f"{name}[{', '.join(['None'] * missing)}]")
    return "; " + "; ".join(hints) if hints else ""


def check_mask(name: str, mask: object, scores_shape: Sequence[int], *, what: str = "",
               scores: str = "scores", device: torch.device | None = None) -> None:
    """``mask`` is None or a torch.bool tensor (True = may attend) with the rank of the
    ``scores`` it masks, of shape ``scores_shape`` (``what``, such as ``"(B, S)"``, names its
    dimensions): size-1 dimensions broadcast, missing ones do not, so a (B, S) mask can never be
    read as (T, S). On ``device`` when given."""
    if mask is None:
        return
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        got = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise TypeError(f"{name} must be a torch.bool tensor (True = may attend), got {got}")
    expected = tuple(scores_shape)
    wanted = f"{what} = {expected}" if what else str(expected)
    if mask.dim() != len(expected):
        raise ValueError(f"{name} must have shape {wanted}, the rank of the {scores} it masks "
                         f"(size-1 dimensions broadcast, missing ones do not), got "
                         f"{shape_of(mask)}{_mask_hints(name, mask, expected)}")
    if any(size not in (1, full) for size, full in zip(mask.shape, expected, strict=True)):
        raise ValueError(f"{name} must have shape {wanted}, got {shape_of(mask)}; each dimension "
                         f"must equal the {scores}' or be 1")
    if device is not None:
        check_device(name, mask, device, f"{scores} is")


def check_qkv(query: object, key: object, value: object, mask: object = None) -> None:
    """The inputs of ``softmax(Q Kᵀ / √d_k) V``: floating-point ``query`` (..., T, d_k), ``key``
    (..., S, d_k) and ``value`` (..., S, d_v) on one device, of one dtype and with the same
    leading dimensions, and ``mask`` None or a torch.bool (..., T, S) mask (:func:`check_mask`:
    each dimension equal to the scores' or 1) on their device."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_tensor(name, x, dtype=FLOATING)
    check_same_device(query=query, key=key, value=value)
    check_same_dtype(query=query, key=key, value=value)
    if query.dim() < 2 or key.dim() != query.dim() or value.dim() != query.dim() \
            or query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2] \
            or query.shape[:-2] != key.shape[:-2] or key.shape[:-2] != value.shape[:-2]:
        raise ValueError(f"expected query (..., T, d_k), key (..., S, d_k) and value "
                         f"(..., S, d_v) with the same leading dimensions, got query "
                         f"{shape_of(query)}, key {shape_of(key)} and value {shape_of(value)}")
    check_mask("mask", mask, (*query.shape[:-1], key.shape[-2]), what="(..., T, S)",
               device=query.device)
