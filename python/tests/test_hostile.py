"""The hostile inputs of `torchtrtc`'s own suite (crates/torchtrtc/tests/hostile.rs), through
the Python package: each ends in a `torchtrt.Error` with the CLI's message, never a crash of
the interpreter, an abort on a huge allocation or an endless read."""

import os
import struct
import time

import numpy as np
import pytest

import torchtrt

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from conftest import make_onnx_mlp, mlp_weights  # noqa: E402

HUGE = 1 << 40


def model(nodes, inits, inputs, outputs):
    graph = helper.make_graph(
        nodes, "hostile",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def i64(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def f32(name, values):
    return numpy_helper.from_array(np.array(values, np.float32), name)


F, I = TensorProto.FLOAT, TensorProto.INT64

HUGE_MODELS = {
    "pad": (model([helper.make_node("Pad", ["x", "pads"], ["y"])], [i64("pads", [0, HUGE, 0, 0])],
                  [("x", F, [1, 4])], [("y", F)]), "Pad#0"),
    "expand": (model([helper.make_node("Expand", ["x", "shape"], ["y"])], [i64("shape", [HUGE, 1])],
                     [("x", F, [1, 1])], [("y", F)]), "Expand#0"),
    "tile": (model([helper.make_node("Tile", ["x", "repeats"], ["y"])], [i64("repeats", [HUGE])],
                   [("x", F, [4])], [("y", F)]), "Tile#0"),
    "constant_of_shape": (model(
        [helper.make_node("ConstantOfShape", ["shape"], ["c"]), helper.make_node("Add", ["c", "x"], ["y"])],
        [i64("shape", [HUGE, 4])], [("x", F, [1])], [("y", F)]), ""),
    "range": (model(
        [helper.make_node("Range", ["start", "limit", "delta"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])],
        [f32("start", 0.0), f32("limit", float(HUGE)), f32("delta", 1.0)], [("x", F, [1])], [("y", F)]), ""),
    "conv": (model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[HUGE] * 4)],
                   [f32("w", [[[[0.5]]]])], [("x", F, [1, 1, 4, 4])], [("y", F)]), "Conv#0"),
    "max_pool": (model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[1, 1], pads=[HUGE] * 4)],
                       [], [("x", F, [1, 1, 4, 4])], [("y", F)]), "MaxPool#0"),
}


@pytest.mark.parametrize("name", sorted(HUGE_MODELS))
def test_enormous_shapes_are_refused_at_compile(name):
    data, layer = HUGE_MODELS[name]
    with pytest.raises(torchtrt.Error, match=rf"{layer}.*memory limit|memory limit.*{layer}") as e:
        torchtrt.compile(data)
    assert "\n" not in str(e.value)


def test_a_shape_from_an_input_value_is_checked_at_run_time():
    data = model([helper.make_node("Expand", ["x", "shape"], ["y"])], [],
                 [("x", F, [1]), ("shape", I, [1])], [("y", F)])
    engine = torchtrt.compile(data)
    x = np.array([0.25], np.float32)
    with pytest.raises(torchtrt.Error, match=r"Expand#0.*memory limit") as e:
        engine.run({"x": x, "shape": np.array([HUGE], np.int64)})
    assert "\n" not in str(e.value)
    got = engine.run({"x": x, "shape": np.array([3], np.int64)})["y"]
    np.testing.assert_array_equal(got, np.full(3, 0.25, np.float32))
    got = engine(torch.tensor([0.5]), torch.tensor([2]))
    assert isinstance(got, torch.Tensor)
    torch.testing.assert_close(got, torch.full((2,), 0.5))


def refused_quickly(call, match):
    start = time.monotonic()
    with pytest.raises(torchtrt.Error, match=match):
        call()
    assert time.monotonic() - start < 10.0


def test_dev_zero_as_an_engine_or_a_model_is_refused_at_once(tmp_path):
    refused_quickly(lambda: torchtrt.load("/dev/zero"), r"not a torchtrt engine")
    refused_quickly(lambda: torchtrt.compile("/dev/zero"), r"cannot begin a protobuf field")
    link = tmp_path / "zero.onnx"
    os.symlink("/dev/zero", link)
    refused_quickly(lambda: torchtrt.compile(link), r"zero.onnx.*cannot begin a protobuf field")


def fnv_words(body: bytes) -> int:
    """The engine header's body checksum (`torchtrt_core::engine::checksum`)."""
    mask = (1 << 64) - 1
    prime = 0x0000_0100_0000_01B3
    h = 0xCBF2_9CE4_8422_2325 ^ len(body)
    whole = len(body) // 8 * 8
    for (w,) in struct.iter_unpack("<Q", body[:whole]):
        h = ((h ^ w) * prime) & mask
        h ^= h >> 29
    tail = body[whole:] + b"\0" * (8 - (len(body) - whole))
    h = ((h ^ struct.unpack("<Q", tail)[0]) * prime) & mask
    return h ^ (h >> 32)


def repaired(data: bytearray) -> bytes:
    body = bytes(data[64:])
    data[24:32] = struct.pack("<Q", len(body))
    data[32:40] = struct.pack("<Q", fnv_words(body))
    return bytes(data)


def test_engines_with_repaired_checksums_load_and_run_or_are_refused():
    engine = torchtrt.compile(make_onnx_mlp(mlp_weights()))
    data = engine.serialize()
    assert repaired(bytearray(data)) == data
    rng = np.random.default_rng(20)
    x = rng.standard_normal((2, 16)).astype(np.float32)
    refused = 0
    for _ in range(300):
        damaged = bytearray(data)
        for at in rng.integers(64, len(data), size=int(rng.integers(1, 4))):
            damaged[at] = int(rng.integers(0, 256))
        try:
            loaded = torchtrt.load(repaired(damaged))
            loaded(x)
        except torchtrt.Error as e:
            assert "\n" not in str(e)
            refused += 1
    assert refused > 0


def test_truncated_libraries_are_refused_before_loading(tmp_path):
    import torchtrt._torchtrt as native

    lib = open(native.__file__, "rb").read()
    before = torchtrt.plugins()
    for load, cut in ((torchtrt.load_plugins, 4096), (torchtrt.load_custom_converters, len(lib) // 2),
                      (torchtrt.load_custom_torch_ops, 100)):
        path = tmp_path / f"libcut_{cut}.so"
        path.write_bytes(lib[:cut])
        with pytest.raises(torchtrt.Error, match=r"not a loadable shared library"):
            load(path)
    assert torchtrt.plugins() == before


def test_a_library_inside_a_file_is_not_reported_missing(tmp_path):
    plain = tmp_path / "plain"
    plain.write_bytes(b"x")
    with pytest.raises(torchtrt.Error) as e:
        torchtrt.load_plugins(plain / "libx.so")
    assert "does not exist" not in str(e.value)
    assert "libx.so" in str(e.value)
