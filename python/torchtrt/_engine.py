"""``torchtrt.Engine``, ``load`` and ``save``."""

from __future__ import annotations

import os
from dataclasses import dataclass

from . import _torchtrt
from ._dtypes import numpy_dtype, torch_dtype
from ._torchtrt import Error


@dataclass(frozen=True)
class TensorSpec:
    """An engine input or output: ``name``, ``dtype`` (a numpy dtype; ``"bf16"`` for
    bfloat16), ``shape`` (ints, and names of dynamic dims — expressions for outputs), and for
    inputs the accepted range ``min_shape`` / ``opt_shape`` / ``max_shape``."""

    name: str
    dtype: object
    shape: tuple
    min_shape: tuple | None = None
    opt_shape: tuple | None = None
    max_shape: tuple | None = None
    dtype_name: str = "f32"

    @property
    def torch_dtype(self):
        """The dtype as a torch dtype."""
        return torch_dtype(self.dtype_name)


def _spec(d: dict) -> TensorSpec:
    return TensorSpec(
        name=d["name"],
        dtype=numpy_dtype(d["dtype"]),
        shape=tuple(d["shape"]),
        min_shape=d.get("min_shape"),
        opt_shape=d.get("opt_shape"),
        max_shape=d.get("max_shape"),
        dtype_name=d["dtype"],
    )


class Engine:
    """A compiled engine. ``engine(*arrays)`` runs it on numpy arrays or torch tensors in
    input order and returns the same kind (one output as is, several as a tuple), on the
    first input's device; ``engine.run({name: array})`` takes and returns dicts. Arrays must
    be contiguous and of the input's dtype (nothing is converted or copied on the way in;
    CUDA tensors must be on the engine's GPU and run on PyTorch's current stream). The GIL is
    released while it runs, and one engine may be called from many threads at once."""

    __slots__ = ("_native", "_inputs", "_outputs")

    def __init__(self, native: _torchtrt.Engine):
        self._native = native
        self._inputs = tuple(_spec(d) for d in native.inputs)
        self._outputs = tuple(_spec(d) for d in native.outputs)

    def __call__(self, *arrays):
        return self._native(*arrays)

    def run(self, feeds):
        """Runs on ``{input name: array}``; returns ``{output name: array}``."""
        try:
            items = dict(feeds)
        except (TypeError, ValueError) as e:
            raise Error(f"run: expected a mapping of input names to arrays, got {type(feeds).__name__}") from e
        names = [s.name for s in self._inputs]
        for k in items:
            if k not in names:
                raise Error(f"the engine has no input `{k}` (inputs: {', '.join(names)})")
        missing = [n for n in names if n not in items]
        if missing:
            raise Error(f"input `{missing[0]}` is missing")
        outs = self._native.run_list([items[n] for n in names])
        return {s.name: o for s, o in zip(self._outputs, outs)}

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        """The inputs, in call order."""
        return self._inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        """The outputs, in return order."""
        return self._outputs

    @property
    def device(self) -> str:
        """``"cpu"`` or ``"cuda:N"``."""
        return self._native.device

    def summary(self) -> dict:
        """Layer and plugin-layer counts, layers per kind (``layer_kinds``), precision and
        target."""
        return self._native.summary()

    def serialize(self) -> bytes:
        """The engine file's bytes."""
        return self._native.serialize()

    def save(self, path) -> None:
        """Writes the engine file (``torchtrt.load`` and ``torchtrtc`` read it)."""
        self._native.save(os.fspath(path))

    def as_module(self):
        """The engine as a ``torch.nn.Module`` (``CompiledModule``)."""
        from ._module import CompiledModule

        return CompiledModule(self)

    def __reduce__(self):
        return (load, (self.serialize(),))

    def __repr__(self) -> str:
        def fmt(specs):
            return ", ".join(f"{s.name}: {s.dtype_name}{list(s.shape)}" for s in specs)

        return f"Engine({self.device}; inputs: {fmt(self._inputs)}; outputs: {fmt(self._outputs)})"


def load(source) -> Engine:
    """An engine from a file path or the engine's bytes."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return Engine(_torchtrt.deserialize(bytes(source)))
    try:
        path = os.fspath(source)
    except TypeError as e:
        raise Error(f"load: expected a path or bytes, got {type(source).__name__}") from e
    return Engine(_torchtrt.load_file(path))


def save(obj, path) -> None:
    """Writes the engine of a ``CompiledModule`` or an ``Engine`` to ``path``."""
    engine = getattr(obj, "engine", obj)
    if not isinstance(engine, Engine):
        raise Error(f"save: expected a torchtrt.CompiledModule or Engine, got {type(obj).__name__}")
    engine.save(path)
