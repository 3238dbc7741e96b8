"""Bad input of every kind raises torchtrt.Error (a RuntimeError) naming what is wrong,
and leaves the engine working."""

import numpy as np
import pytest

import torchtrt
from conftest import mlp_reference, torch


@pytest.fixture(autouse=True)
def engine_still_works(onnx_engine, weights):
    yield
    x = np.random.default_rng(0).standard_normal((2, 16)).astype(np.float32)
    np.testing.assert_allclose(onnx_engine(x), mlp_reference(x, weights), rtol=1e-5, atol=1e-5)


def test_error_is_a_runtime_error():
    assert issubclass(torchtrt.Error, RuntimeError)


@pytest.mark.parametrize("array, match", [
    (np.zeros((2, 16), np.float64), r"input `x` is f64"),
    (np.zeros((2, 16), np.int32), r"input `x` is i32"),
    (np.zeros((2, 15), np.float32), r"input `x`.*\[2,15\]|input `x` has shape"),
    (np.zeros((16,), np.float32), r"input `x`"),
    (np.zeros((2, 16, 1), np.float32), r"input `x`"),
    (np.zeros((65, 16), np.float32), r"outside the engine's range"),
    (np.zeros((0, 16), np.float32), r"outside the engine's range"),
])
def test_wrong_dtype_shape_rank(onnx_engine, array, match):
    with pytest.raises(torchtrt.Error, match=match):
        onnx_engine(array)


def test_wrong_count_and_names(onnx_engine):
    x = np.zeros((2, 16), np.float32)
    with pytest.raises(torchtrt.Error, match=r"takes 1 inputs \(x\), got 2"):
        onnx_engine(x, x)
    with pytest.raises(torchtrt.Error, match=r"takes 1 inputs"):
        onnx_engine()
    with pytest.raises(torchtrt.Error, match=r"no input `z` \(inputs: x\)"):
        onnx_engine.run({"z": x})
    with pytest.raises(torchtrt.Error, match=r"input `x` is missing"):
        onnx_engine.run({})
    with pytest.raises(torchtrt.Error, match=r"mapping"):
        onnx_engine.run(3)


@pytest.mark.parametrize("make", [
    lambda: np.zeros((2, 32), np.float32)[:, ::2],
    lambda: np.zeros((16, 2), np.float32).T,
    lambda: torch.zeros(16, 2).t(),
    lambda: torch.zeros(2, 32)[:, 1::2],
])
def test_non_contiguous_is_refused(onnx_engine, make):
    with pytest.raises(torchtrt.Error, match=r"input `x` is not contiguous.*contiguous"):
        onnx_engine(make())


@pytest.mark.parametrize("value", [[[0.0] * 16] * 2, None, "x", 3.0, b"\x00" * 128])
def test_not_an_array(onnx_engine, value):
    with pytest.raises(torchtrt.Error, match=r"input `x`: expected a numpy array or a torch tensor"):
        onnx_engine(value)


class FakeCuda(torch.Tensor):
    """A CPU tensor that claims to live on cuda:0, to reach the device check without a GPU."""

    def __dlpack_device__(self):
        return (2, 0)


def test_wrong_device(onnx_engine):
    x = torch.zeros(2, 16).as_subclass(FakeCuda)
    with pytest.raises(torchtrt.Error, match=r"input `x` is on cuda:0, the engine runs on cpu"):
        onnx_engine(x)
    with pytest.raises(torchtrt.Error, match=r"input `x`"):
        onnx_engine(torch.zeros(2, 16, device="meta"))


@pytest.mark.parametrize("make", [
    lambda: torch.zeros(2, 16).to_sparse(),
    lambda: torch.quantize_per_tensor(torch.zeros(2, 16), 0.1, 0, torch.quint8),
    lambda: torch.zeros(2, 16, dtype=torch.complex64).conj(),
    lambda: torch.zeros(2, 16).to(torch.float8_e4m3fn),
    lambda: torch.nested.nested_tensor([torch.zeros(16), torch.zeros(16)], layout=torch.jagged),
], ids=["sparse", "quantized", "complex_conj", "float8", "nested"])
def test_tensors_dlpack_cannot_describe_are_refused(onnx_engine, make):
    with pytest.raises(torchtrt.Error, match=r"input `x`"):
        onnx_engine(make())


def test_readonly_numpy_input_is_fine(onnx_engine, weights):
    x = np.random.default_rng(3).standard_normal((2, 16)).astype(np.float32)
    x.setflags(write=False)
    np.testing.assert_allclose(onnx_engine(x), mlp_reference(x, weights), rtol=1e-5, atol=1e-5)


def test_garbage_and_missing_files(tmp_path):
    with pytest.raises(torchtrt.Error, match=r"loading engine bytes"):
        torchtrt.load(b"definitely not an engine")
    with pytest.raises(torchtrt.Error, match=r"missing.engine"):
        torchtrt.load(tmp_path / "missing.engine")
    with pytest.raises(torchtrt.Error, match=r"missing.onnx"):
        torchtrt.compile(str(tmp_path / "missing.onnx"))
    with pytest.raises(torchtrt.Error, match=r"missing.pt2"):
        torchtrt.compile(tmp_path / "missing.pt2")
    with pytest.raises(torchtrt.Error, match=r"importing ONNX model bytes"):
        torchtrt.compile(b"\x08\x07garbage that is not protobuf \xff\xff")
    with pytest.raises(torchtrt.Error, match=r"importing the exported program"):
        torchtrt.compile(b"PK\x03\x04 but not a zip")
    bad = tmp_path / "bad.engine"
    bad.write_bytes(b"\x00" * 64)
    with pytest.raises(torchtrt.Error, match=r"bad.engine"):
        torchtrt.load(bad)
    with pytest.raises(torchtrt.Error, match=r"expected a path or bytes"):
        torchtrt.load(12)


def test_truncated_engine(onnx_engine):
    data = onnx_engine.serialize()
    for cut in (8, len(data) // 2, len(data) - 1):
        with pytest.raises(torchtrt.Error, match=r"loading engine bytes"):
            torchtrt.load(data[:cut])
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF
    with pytest.raises(torchtrt.Error):
        torchtrt.load(bytes(flipped))


def test_bad_compile_arguments(onnx_path, two_heads):
    with pytest.raises(torchtrt.Error, match=r"`tpu`: expected cpu, cuda or cuda:N"):
        torchtrt.compile(onnx_path, device="tpu")
    with pytest.raises(torchtrt.Error, match=r"i16 is not a precision \(f32, f16, bf16, int8\)"):
        torchtrt.compile(onnx_path, enabled_precisions={torch.int16})
    with pytest.raises(torchtrt.Error, match=r"kernel_plugins k.toml: .*k.toml"):
        torchtrt.compile(onnx_path, kernel_plugins=["k.toml"])
    with pytest.raises(torchtrt.Error, match=r"the model has no input `nope` \(inputs: x\)"):
        torchtrt.compile(onnx_path, [torchtrt.Input(shape=(2, 16), name="nope")])
    with pytest.raises(torchtrt.Error, match=r"expected a torch.nn.Module"):
        torchtrt.compile(42)
    with pytest.raises(torchtrt.Error, match=r"inputs"):
        torchtrt.compile(two_heads)
    with pytest.raises(torchtrt.Error, match=r"exporting the module"):
        torchtrt.compile(two_heads, [torch.randn(2, 5), torch.randn(2, 6)])


def test_bad_input_specs():
    with pytest.raises(torchtrt.Error, match=r"min ≤ opt ≤ max"):
        torchtrt.Input(min_shape=(4, 2), max_shape=(2, 2))
    with pytest.raises(torchtrt.Error, match=r"different ranks"):
        torchtrt.Input(min_shape=(1, 2), max_shape=(2, 2, 2))
    with pytest.raises(torchtrt.Error, match=r"not both"):
        torchtrt.Input((1, 2), min_shape=(1, 2))
    with pytest.raises(torchtrt.Error, match=r"dtype"):
        torchtrt.Input((1, 2), dtype="complex64")
    with pytest.raises(torchtrt.Error, match=r"negative"):
        torchtrt.Input((-1, 2))
