"""``torchtrt.compile``."""

from __future__ import annotations

import io
import os

import numpy as np

from . import _torchtrt
from ._dtypes import name_of
from ._dtypes import precision as _precision
from ._engine import Engine
from ._input import Input
from ._plugins import load_custom_converters, load_custom_torch_ops, load_kernel_plugin, load_plugins
from ._torchtrt import Error


def _device_name(device) -> str:
    if type(device).__module__.startswith("torch") and hasattr(device, "type"):
        if device.type == "cpu":
            return "cpu"
        if device.type == "cuda":
            return f"cuda:{device.index if device.index is not None else 0}"
        raise Error(f"device `{device}` is not `cpu`, `cuda` or `cuda:N`")
    if not isinstance(device, str):
        raise Error(f"device: expected a string or torch.device, got {type(device).__name__}")
    ok = device in ("cpu", "cuda") or (device.startswith("cuda:") and device[5:].isdigit())
    if not ok:
        raise Error(f"`{device}`: expected cpu, cuda or cuda:N")
    return device


def _is_torch(obj, *names) -> bool:
    import sys

    torch = sys.modules.get("torch")
    if torch is None:
        return False
    for n in names:
        target = torch
        for part in n.split("."):
            target = getattr(target, part, None)
        if target is not None and isinstance(obj, target):
            return True
    return False


def _spec(x, what):
    """``(name, [(min, opt, max)…])`` of an ``Input``, or of an example tensor's fixed shape."""
    if isinstance(x, Input):
        return (x.name, x.ranges())
    shape = getattr(x, "shape", None)
    if shape is None or not (_is_torch(x, "Tensor") or hasattr(x, "__array__")):
        raise Error(f"{what}: expected a torchtrt.Input or a tensor, got {type(x).__name__}")
    return (None, [(int(d), int(d), int(d)) for d in shape])


def _specs(inputs) -> list:
    """The specs of ``inputs``, in order (matched to the model's inputs by name, else by
    position)."""
    if inputs is not None and not isinstance(inputs, (list, tuple)):
        raise Error(f"inputs: expected a list of torchtrt.Input or tensors, got {type(inputs).__name__}")
    return [_spec(x, f"inputs[{k}]") for k, x in enumerate(inputs or ())]


def _export(module, inputs, kwarg_inputs):
    import torch
    from torch.export import Dim, export

    if inputs is None and not kwarg_inputs:
        raise Error("inputs: a module is exported with example inputs: pass tensors or torchtrt.Input")
    held = [t for t in (*module.parameters(), *module.buffers())]
    device = held[0].device if held else torch.device("cpu")
    args, dynamic = [], []
    for k, x in enumerate(inputs or ()):
        example, dims = _example(x, Dim, f"inputs[{k}]", device)
        args.append(example)
        dynamic.append(dims)
    kwargs, kw_dynamic = {}, {}
    for name, x in (kwarg_inputs or {}).items():
        kwargs[name], kw_dynamic[name] = _example(x, Dim, f"kwarg_inputs[{name!r}]", device)
    shapes = None
    if any(d for d in dynamic) or any(d for d in kw_dynamic.values()):
        shapes = (tuple(dynamic), kw_dynamic) if kwargs else tuple(dynamic)
    try:
        module = module.eval()
        with torch.no_grad():
            if kwargs:
                return export(module, tuple(args), kwargs, dynamic_shapes=shapes)
            return export(module, tuple(args), dynamic_shapes=shapes)
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise Error(f"exporting the module with torch.export: {first}") from e


def _example(x, Dim, what, device):
    """An example tensor for ``x`` on the module's ``device``, and its dynamic dims."""
    import torch

    if isinstance(x, Input):
        dims = {i: Dim.AUTO(min=a, max=c) for i, (a, _, c) in enumerate(x.ranges()) if a != c}
        return x.example().to(device), dims or None
    if isinstance(x, torch.Tensor):
        return x, None
    raise Error(f"{what}: expected a torch tensor or torchtrt.Input, got {type(x).__name__}")


def _program_bytes(program) -> bytes:
    import torch

    buf = io.BytesIO()
    try:
        torch.export.save(program, buf)
    except Exception as e:
        raise Error(f"saving the exported program: {e}") from e
    return buf.getvalue()


def _load_libraries(plugins, custom_converters, custom_torch_ops):
    for load, libs in ((load_plugins, plugins), (load_custom_converters, custom_converters),
                       (load_custom_torch_ops, custom_torch_ops)):
        if isinstance(libs, (str, os.PathLike)):
            libs = (libs,)
        for lib in libs or ():
            load(lib)


def _module_specs(program, inputs, kwarg_inputs):
    """The specs of a module's inputs, named by the program's user inputs (positional ones
    by position, keyword ones by keyword)."""
    names = list(program.graph_signature.user_inputs)
    specs = []
    for k, x in enumerate(inputs or ()):
        _, ranges = _spec(x, f"inputs[{k}]")
        if k < len(names):
            specs.append((names[k], ranges))
    for key, x in (kwarg_inputs or {}).items():
        _, ranges = _spec(x, f"kwarg_inputs[{key!r}]")
        if key in names:
            specs.append((key, ranges))
    return specs


def compile(model, inputs=None, *, device="cpu", enabled_precisions=None, tf32=False,
            plugins=(), custom_converters=(), custom_torch_ops=(), kernel_plugins=(),
            kwarg_inputs=None, calibrator=None):
    """Compiles ``model`` into an engine, as ``torch_tensorrt.compile``.

    ``model``: a ``torch.nn.Module`` (exported with ``torch.export`` on ``inputs`` — example
    tensors, or ``torchtrt.Input``s whose ranges become dynamic dims — and ``kwarg_inputs``),
    a ``torch.export.ExportedProgram``, a path to an ``.onnx`` or ``.pt2`` file, ONNX or
    ``.pt2`` bytes, or an ``onnx.ModelProto``. For a module or program it returns a
    ``CompiledModule`` (a ``torch.nn.Module``, with ``.engine``); otherwise an ``Engine``.
    For a file, bytes or a program, ``inputs`` may hold ``Input``s that narrow or fix the
    model's dynamic dims (by ``name``, else by position).

    ``device``: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or a ``torch.device``.
    ``enabled_precisions``: torch or numpy dtypes; the lowest float precision in the set is
    the engine's (``{torch.float16}`` → f16; f32 inputs and outputs stay f32). With
    ``torch.int8`` in the set, convolutions (and on the CPU linear layers) run on 8-bit
    integers, the rest in f32, or in f16 with ``torch.float16`` in the set too; calibrated
    on ``calibrator``: an iterable of input batches, each a tensor or array (one input), a
    tuple of them (inputs in order) or a dict by input name.
    ``tf32``: let f32 matrix products use TF32 on a GPU.
    ``plugins`` / ``custom_converters`` / ``custom_torch_ops``: extension libraries loaded
    first (``torchtrtc --plugins`` …); ``kernel_plugins``: kernel-plugin specs (TOML)
    compiled and registered first (``torchtrtc --kernel-plugins``).
    """
    device = _device_name(device)
    prec = _precision(enabled_precisions)
    calibration = _calibration(calibrator, prec)
    _load_libraries(plugins, custom_converters, custom_torch_ops)
    if isinstance(kernel_plugins, (str, os.PathLike)):
        kernel_plugins = (kernel_plugins,)
    for spec in kernel_plugins or ():
        load_kernel_plugin(spec)
    if _is_torch(model, "nn.Module"):
        program = _export(model, inputs, kwarg_inputs)
        return _compile_program(program, _module_specs(program, inputs, kwarg_inputs), device, prec, tf32,
                                calibration)
    if _is_torch(model, "export.ExportedProgram"):
        return _compile_program(model, _specs(inputs), device, prec, tf32, calibration)
    specs = _specs(inputs)
    if isinstance(model, (bytes, bytearray, memoryview)):
        data = bytes(model)
        if data[:4] == b"PK\x03\x04":
            return Engine(_torchtrt.compile_pt2(data, specs, device, prec, tf32, calibration))
        return Engine(_torchtrt.compile_onnx(data, specs, device, prec, tf32, calibration))
    if type(model).__name__ == "ModelProto" and hasattr(model, "SerializeToString"):
        return Engine(_torchtrt.compile_onnx(model.SerializeToString(), specs, device, prec, tf32, calibration))
    try:
        path = os.fspath(model)
    except TypeError:
        raise Error(
            "model: expected a torch.nn.Module, torch.export.ExportedProgram, onnx.ModelProto, "
            f"a path to an .onnx or .pt2 file, or model bytes; got {type(model).__name__}"
        ) from None
    if _is_pt2(path):
        return Engine(_torchtrt.compile_pt2(path, specs, device, prec, tf32, calibration))
    return Engine(_torchtrt.compile_onnx(path, specs, device, prec, tf32, calibration))


def _is_pt2(path: str) -> bool:
    if path.endswith(".pt2"):
        return True
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"PK\x03\x04"
    except OSError:
        return False


def _compile_program(program, specs, device, prec, tf32, calibration):
    from ._module import CompiledModule

    native = _torchtrt.compile_pt2(_program_bytes(program), specs, device, prec, tf32, calibration)
    spec = program.call_spec
    return CompiledModule(Engine(native), spec.in_spec, spec.out_spec)


def _calibration(calibrator, prec):
    """The calibrator's batches as the native compile takes them: per batch, per input,
    ``(name or None, dtype name, shape, bytes)``; ``None`` unless the precision is int8."""
    if not prec.startswith("int8"):
        if calibrator is not None:
            raise Error("calibrator: only used with torch.int8 in enabled_precisions")
        return None
    if calibrator is None:
        raise Error("enabled_precisions with torch.int8 needs a calibrator: an iterable of input batches")
    batches = []
    for batch in calibrator:
        if isinstance(batch, dict):
            items = list(batch.items())
        elif isinstance(batch, (tuple, list)):
            items = [(None, v) for v in batch]
        else:
            items = [(None, batch)]
        batches.append([(name, *_array_bytes(v)) for name, v in items])
    if not batches:
        raise Error("calibrator: no batches")
    return batches


def _array_bytes(value):
    """``(dtype name, shape, bytes)`` of a torch tensor or array-like, C-contiguous."""
    if _is_torch(value, "Tensor"):
        value = value.detach().cpu().contiguous().numpy()
    arr = np.ascontiguousarray(value)
    return name_of(arr.dtype), list(arr.shape), arr.tobytes()
