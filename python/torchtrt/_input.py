"""``torchtrt.Input``: an input's shape (fixed, or a range for dynamic dims), dtype and name."""

from __future__ import annotations

from ._dtypes import name_of
from ._torchtrt import Error


def _dims(shape, what: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in shape)
    except TypeError as e:
        raise Error(f"Input: {what} {shape!r} is not a sequence of ints") from e
    if any(d < 0 for d in dims):
        raise Error(f"Input: {what} {shape!r} has a negative dim")
    return dims


class Input:
    """An engine input, as Torch-TensorRT's ``Input``: a fixed ``shape``, or
    ``min_shape``/``opt_shape``/``max_shape`` for dynamic dims (dims where min and max differ),
    with a ``dtype`` (torch or numpy dtype; float32 by default) and an optional ``name``
    (else inputs are matched by position)."""

    def __init__(self, shape=None, *, min_shape=None, opt_shape=None, max_shape=None,
                 dtype=None, name=None):
        if shape is not None:
            if min_shape is not None or opt_shape is not None or max_shape is not None:
                raise Error("Input: give shape, or min_shape/opt_shape/max_shape, not both")
            self.min_shape = self.opt_shape = self.max_shape = _dims(shape, "shape")
        else:
            if min_shape is None or max_shape is None:
                raise Error("Input: give shape, or min_shape and max_shape (opt_shape optional)")
            self.min_shape = _dims(min_shape, "min_shape")
            self.max_shape = _dims(max_shape, "max_shape")
            self.opt_shape = _dims(opt_shape, "opt_shape") if opt_shape is not None else self.max_shape
            if not len(self.min_shape) == len(self.opt_shape) == len(self.max_shape):
                raise Error("Input: min_shape, opt_shape and max_shape have different ranks")
            for i, (a, b, c) in enumerate(zip(self.min_shape, self.opt_shape, self.max_shape)):
                if not a <= b <= c:
                    raise Error(f"Input: dim {i} needs min ≤ opt ≤ max, got {a}, {b}, {c}")
        self.dtype = name_of(dtype) if dtype is not None else "f32"
        self.name = name

    @property
    def shape(self) -> tuple[int, ...]:
        """The fixed shape; the opt shape of a dynamic input."""
        return self.opt_shape

    def is_dynamic(self) -> bool:
        """Whether any dim has a range."""
        return self.min_shape != self.max_shape

    def ranges(self) -> list[tuple[int, int, int]]:
        """``(min, opt, max)`` per dim."""
        return list(zip(self.min_shape, self.opt_shape, self.max_shape))

    def example(self):
        """A random torch tensor for exporting: at the opt shape, except that a dynamic dim
        whose opt is 0 or 1 takes 2 when its range allows (torch.export specializes sizes 0
        and 1)."""
        import torch

        from ._dtypes import torch_dtype

        shape = [o if a == c or o >= 2 else min(2, c) for a, o, c in self.ranges()]
        dt = torch_dtype(self.dtype)
        if dt.is_floating_point:
            return torch.randn(shape, dtype=dt)
        if dt == torch.bool:
            return torch.ones(shape, dtype=dt)
        return torch.zeros(shape, dtype=dt)

    def __repr__(self) -> str:
        name = f", name={self.name!r}" if self.name else ""
        if not self.is_dynamic():
            return f"Input(shape={self.min_shape}, dtype={self.dtype}{name})"
        return (f"Input(min_shape={self.min_shape}, opt_shape={self.opt_shape}, "
                f"max_shape={self.max_shape}, dtype={self.dtype}{name})")
