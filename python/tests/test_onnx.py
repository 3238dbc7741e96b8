"""ONNX models: compiled from a path, bytes or a ModelProto, run on numpy arrays and CPU
torch tensors, dynamic batch through Input ranges."""

import numpy as np
import pytest

import torchtrt
from conftest import mlp_reference, torch


@pytest.mark.parametrize("batch", [1, 5, 64])
def test_onnx_path_runs_numpy_at_every_batch(onnx_engine, weights, rng, batch):
    x = rng.standard_normal((batch, 16)).astype(np.float32)
    y = onnx_engine(x)
    assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == (batch, 8)
    np.testing.assert_allclose(y, mlp_reference(x, weights), rtol=1e-5, atol=1e-5)


def test_onnx_bytes_and_modelproto_compile_alike(onnx_model, weights, rng):
    x = rng.standard_normal((3, 16)).astype(np.float32)
    spec = [torchtrt.Input(shape=(3, 16))]
    from_bytes = torchtrt.compile(onnx_model.SerializeToString(), spec)
    from_proto = torchtrt.compile(onnx_model, spec)
    assert isinstance(from_bytes, torchtrt.Engine) and isinstance(from_proto, torchtrt.Engine)
    want = mlp_reference(x, weights)
    np.testing.assert_allclose(from_bytes(x), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(from_proto(x), want, rtol=1e-5, atol=1e-5)
    assert from_bytes.inputs[0].shape == (3, 16)


def test_engine_describes_inputs_and_outputs(onnx_engine):
    (x,) = onnx_engine.inputs
    assert x.name == "x" and x.dtype == np.float32 and x.dtype_name == "f32"
    assert x.min_shape == (1, 16) and x.opt_shape == (4, 16) and x.max_shape == (64, 16)
    assert x.shape[1] == 16 and isinstance(x.shape[0], str)
    (y,) = onnx_engine.outputs
    assert y.name == "y" and y.shape[1] == 8
    assert onnx_engine.device == "cpu"
    assert "x" in repr(onnx_engine)


def test_run_by_name_returns_dict(onnx_engine, weights, rng):
    x = rng.standard_normal((2, 16)).astype(np.float32)
    out = onnx_engine.run({"x": x})
    assert list(out) == ["y"]
    np.testing.assert_allclose(out["y"], mlp_reference(x, weights), rtol=1e-5, atol=1e-5)


def test_cpu_torch_tensors_in_give_torch_tensors_out(onnx_engine, weights, rng):
    x = rng.standard_normal((6, 16)).astype(np.float32)
    y = onnx_engine(torch.from_numpy(x))
    assert isinstance(y, torch.Tensor) and y.device.type == "cpu" and y.dtype == torch.float32
    np.testing.assert_allclose(y.numpy(), mlp_reference(x, weights), rtol=1e-5, atol=1e-5)


def test_grad_tensors_parameters_views_and_subclasses_are_read(onnx_engine, weights, rng):
    x = rng.standard_normal((5, 16)).astype(np.float32)
    want = mlp_reference(x[1:], weights)
    grad = torch.from_numpy(x[1:].copy()).requires_grad_()
    param = torch.nn.Parameter(torch.from_numpy(x[1:].copy()))
    view = torch.from_numpy(x)[1:]
    assert view.storage_offset() == 16

    class Tagged(torch.Tensor):
        pass

    tagged = torch.from_numpy(x[1:].copy()).as_subclass(Tagged)
    for t in (grad, param, view, tagged):
        y = onnx_engine(t)
        assert type(y) is torch.Tensor and not y.requires_grad
        np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-5)


def test_outputs_are_fresh_arrays_every_call(onnx_engine, rng):
    x1 = rng.standard_normal((2, 16)).astype(np.float32)
    x2 = rng.standard_normal((2, 16)).astype(np.float32)
    y1 = onnx_engine(x1)
    keep = y1.copy()
    y2 = onnx_engine(x2)
    np.testing.assert_array_equal(y1, keep)
    assert not np.allclose(y1, y2)


def test_unaligned_input_is_read_correctly(onnx_engine, weights, rng):
    raw = np.empty(2 * 16 * 4 + 4, dtype=np.uint8)
    x = raw[4:].view(np.float32).reshape(2, 16)
    x[...] = rng.standard_normal((2, 16))
    np.testing.assert_allclose(onnx_engine(x), mlp_reference(x, weights), rtol=1e-5, atol=1e-5)


def test_f16_precision_engine_stays_close(onnx_path, weights, rng):
    engine = torchtrt.compile(onnx_path, [torchtrt.Input(shape=(4, 16))], enabled_precisions={np.float16})
    assert engine.summary()["precision"] == "f16"
    x = rng.standard_normal((4, 16)).astype(np.float32)
    y = engine(x)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, mlp_reference(x, weights), rtol=2e-2, atol=2e-2)


def test_example_arrays_fix_the_shape(onnx_path, weights, rng):
    x = rng.standard_normal((3, 16)).astype(np.float32)
    engine = torchtrt.compile(onnx_path, [x])
    assert engine.inputs[0].shape == (3, 16)
    np.testing.assert_allclose(engine(x), mlp_reference(x, weights), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.uint16, np.uint32, np.uint64])
def test_unsigned_arrays_keep_their_dtype_and_wrap(dtype):
    from onnx import TensorProto, helper

    code = {np.uint16: TensorProto.UINT16, np.uint32: TensorProto.UINT32,
            np.uint64: TensorProto.UINT64}[dtype]
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["y"]), helper.make_node("BitShift", ["a", "s"], ["z"], direction="RIGHT")],
        "unsigned",
        [helper.make_tensor_value_info(n, code, [4]) for n in ("a", "b", "s")],
        [helper.make_tensor_value_info(n, code, [4]) for n in ("y", "z")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    engine = torchtrt.compile(model, [torchtrt.Input(shape=(4,), dtype=dtype, name=n)
                                      for n in ("a", "b", "s")])
    top = np.iinfo(dtype).max
    a = np.array([1, top, top - 3, 40], dtype=dtype)
    b = np.array([2, 1, 7, 2], dtype=dtype)
    s = np.array([0, 1, np.iinfo(dtype).bits - 1, 3], dtype=dtype)
    y, z = engine(a, b, s)
    assert y.dtype == dtype and z.dtype == dtype
    np.testing.assert_array_equal(y, a + b)
    np.testing.assert_array_equal(z, a >> s)
