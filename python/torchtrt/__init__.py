"""torchtrt for Python: compile PyTorch modules, ``torch.export`` programs and ONNX models
into engines (with plugins), save and load them, and run them on numpy arrays and torch
tensors — on the CPU or a CUDA GPU, without copying the tensors.

    import torch, torchtrt
    trt_model = torchtrt.compile(model, [torchtrt.Input(min_shape=(1, 3, 224, 224),
                                                        opt_shape=(8, 3, 224, 224),
                                                        max_shape=(16, 3, 224, 224))],
                                 device="cuda", enabled_precisions={torch.float16})
    y = trt_model(x)
    torchtrt.save(trt_model, "model.engine")
    engine = torchtrt.load("model.engine")

Errors of every kind raise ``torchtrt.Error`` (a ``RuntimeError``) with the message the
``torchtrtc`` CLI prints. ``TORCHTRT_LOG`` (``error``, ``warn``, ``info``, ``debug``,
``trace``) sets the log level; compiling draws a progress bar on a terminal.
"""

from ._torchtrt import Error
from ._compile import compile
from ._engine import Engine, TensorSpec, load, save
from ._input import Input
from ._plugins import (
    Plugin,
    PluginField,
    allow_engine_host_code,
    load_custom_converters,
    load_custom_torch_ops,
    load_kernel_plugin,
    load_plugins,
    plugins,
)

__version__ = "0.1.0"


def __getattr__(name):
    if name == "CompiledModule":
        from ._module import CompiledModule

        return CompiledModule
    raise AttributeError(f"module 'torchtrt' has no attribute {name!r}")


def cuda_available() -> bool:
    """Whether torchtrt can run engines on ``cuda:0`` in this process."""
    from ._torchtrt import cuda_available as probe

    return probe()[0]


__all__ = [
    "CompiledModule",
    "Engine",
    "Error",
    "Input",
    "Plugin",
    "PluginField",
    "TensorSpec",
    "allow_engine_host_code",
    "compile",
    "cuda_available",
    "load",
    "load_custom_converters",
    "load_custom_torch_ops",
    "load_kernel_plugin",
    "load_plugins",
    "plugins",
    "save",
]
