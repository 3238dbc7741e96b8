"""One engine called from several Python threads at once."""

import threading

import numpy as np

from conftest import mlp_reference, torch


def test_one_engine_many_threads(onnx_engine, weights):
    errors, checked = [], []

    def work(seed):
        g = np.random.default_rng(seed)
        try:
            for i in range(25):
                batch = 1 + (seed + i) % 9
                x = g.standard_normal((batch, 16)).astype(np.float32)
                arg = torch.from_numpy(x) if i % 2 else x
                y = onnx_engine(arg)
                y = y.numpy() if isinstance(y, torch.Tensor) else y
                np.testing.assert_allclose(y, mlp_reference(x, weights), rtol=1e-5, atol=1e-5)
                checked.append(1)
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert len(checked) == 8 * 25


def heavy_model(layers=24, n=512):
    """A chain of n×n MatMuls: long enough a run to watch the GIL during it."""
    from onnx import TensorProto, helper, numpy_helper

    g = np.random.default_rng(11)
    inits, nodes, prev = [], [], "x"
    for i in range(layers):
        w = (g.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"h{i}"]))
        prev = f"h{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"]))
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, n])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, n])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_gil_is_released_while_an_engine_runs():
    import threading
    import time

    import pytest

    import torchtrt

    engine = torchtrt.compile(heavy_model())
    x = np.random.default_rng(2).standard_normal((512, 512)).astype(np.float32)
    t = time.perf_counter()
    engine(x)
    if time.perf_counter() - t < 0.05:
        pytest.skip("a run is too short here to observe the GIL during it")
    started, done_at = threading.Event(), []

    def worker():
        started.set()
        engine(x)
        done_at.append(time.perf_counter())

    th = threading.Thread(target=worker)
    th.start()
    started.wait()
    time.sleep(0.005)
    seen = time.perf_counter()
    th.join()
    assert seen < done_at[0] - 0.01, "the main thread ran Python only after the run ended"
