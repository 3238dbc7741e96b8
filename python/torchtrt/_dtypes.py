"""dtype names: torchtrt's (``f32``…), numpy's and torch's."""

from __future__ import annotations

import numpy as np

from ._torchtrt import Error

#: torchtrt name → numpy dtype name (bf16 has none).
NUMPY = {
    "f32": "float32",
    "f16": "float16",
    "f64": "float64",
    "i64": "int64",
    "i32": "int32",
    "i16": "int16",
    "i8": "int8",
    "u8": "uint8",
    "u16": "uint16",
    "u32": "uint32",
    "u64": "uint64",
    "bool": "bool",
}

#: torchtrt name → torch dtype attribute name.
TORCH = {**NUMPY, "bf16": "bfloat16"}

_PRECISIONS = {"f32", "f16", "bf16"}


def name_of(dtype) -> str:
    """torchtrt's name for a torch dtype, numpy dtype (or type) or dtype name."""
    if isinstance(dtype, str) and dtype in TORCH:
        return dtype
    mod = type(dtype).__module__
    if mod.startswith("torch"):
        text = str(dtype).removeprefix("torch.")
        for k, v in TORCH.items():
            if v == text:
                return k
        raise Error(f"dtype {dtype} has no torchtrt dtype")
    try:
        np_name = np.dtype(dtype).name
    except TypeError as e:
        raise Error(f"dtype {dtype!r} is not a torch or numpy dtype") from e
    for k, v in NUMPY.items():
        if v == np_name:
            return k
    if np_name == "bfloat16":
        return "bf16"
    raise Error(f"dtype {dtype!r} has no torchtrt dtype")


def numpy_dtype(name: str):
    """The numpy dtype of a torchtrt dtype name; bf16 stays the string ``"bf16"``."""
    return np.dtype(NUMPY[name]) if name in NUMPY else name


def torch_dtype(name: str):
    """The torch dtype of a torchtrt dtype name."""
    import torch

    return getattr(torch, TORCH[name])


def precision(enabled_precisions) -> str:
    """The engine precision a Torch-TensorRT ``enabled_precisions`` set asks for: ``int8``
    when it holds int8 (integer convolutions and linear layers, f32 elsewhere; ``int8+f16``
    with f16 elsewhere when it holds float16 too), else the
    lowest float precision in it (``{torch.float16}`` and ``{torch.float32, torch.float16}``
    both give f16); f32 when empty or ``None``."""
    if enabled_precisions is None:
        return "f32"
    if isinstance(enabled_precisions, (str, bytes)) or not hasattr(enabled_precisions, "__iter__"):
        enabled_precisions = {enabled_precisions}
    names = {name_of(d) for d in enabled_precisions}
    bad = names - _PRECISIONS - {"i8"}
    if bad:
        raise Error(
            f"enabled_precisions: {', '.join(sorted(bad))} is not a precision (f32, f16, bf16, int8)"
        )
    if {"f16", "bf16"} <= names:
        raise Error("enabled_precisions: choose f16 or bf16, not both")
    if "i8" in names:
        if "bf16" in names:
            raise Error("enabled_precisions: int8 runs with f32 or f16, not with bf16")
        return "int8+f16" if "f16" in names else "int8"
    for p in ("f16", "bf16"):
        if p in names:
            return p
    return "f32"
    if isinstance(enabled_precisions, (str, bytes)) or not hasattr(enabled_precisions, "__iter__"):
        enabled_precisions = {enabled_precisions}
    names = {name_of(d) for d in enabled_precisions}
    bad = names - _PRECISIONS
    if bad:
        raise Error(
            f"enabled_precisions: {', '.join(sorted(bad))} is not a float precision (f32, f16, bf16)"
        )
    if {"f16", "bf16"} <= names:
        raise Error("enabled_precisions: choose f16 or bf16, not both")
    for p in ("f16", "bf16"):
        if p in names:
            return p
    return "f32"
