"""Kernel plugins from Python: the example's SwiGLU spec (examples/kernel_plugin) compiled
into an engine through ``compile(kernel_plugins=...)``, matched against numpy, saved, and
loaded with no spec registered — refused until engine host code is allowed."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import torchtrt

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "kernel_plugin"


def _example():
    spec = importlib.util.spec_from_file_location("make_model", EXAMPLE / "make_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_kernel_plugin_compiles_runs_and_travels_in_the_engine(tmp_path):
    pytest.importorskip("onnx")
    _example().main(tmp_path)
    engine = torchtrt.compile(
        str(tmp_path / "model.onnx"),
        [torchtrt.Input(min_shape=(1, 1, 64), opt_shape=(2, 16, 64), max_shape=(4, 32, 64), name="x")],
        kernel_plugins=[EXAMPLE / "swiglu.toml"],
    )
    x = np.load(tmp_path / "x.npy")
    want = np.load(tmp_path / "ref.npy")
    np.testing.assert_allclose(engine(x), want, rtol=1e-4, atol=1e-4)
    assert "example::SwiGLU@1" in torchtrt.load_kernel_plugin(EXAMPLE / "swiglu.toml")
    data = engine.serialize()
    torchtrt.allow_engine_host_code(False)
    with pytest.raises(torchtrt.Error, match=r"engine host code is not allowed"):
        torchtrt.load(data)
    torchtrt.allow_engine_host_code(True)
    try:
        loaded = torchtrt.load(data)
    finally:
        torchtrt.allow_engine_host_code(False)
    np.testing.assert_allclose(loaded(x), want, rtol=1e-4, atol=1e-4)
