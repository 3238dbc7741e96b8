"""save → load, in this process and in a new one."""

import pickle
import subprocess
import sys
import textwrap

import numpy as np

import torchtrt
from conftest import mlp_reference, torch


def test_save_then_load_in_a_new_process(onnx_engine, weights, rng, tmp_path):
    path = tmp_path / "mlp.engine"
    torchtrt.save(onnx_engine, path)
    x = rng.standard_normal((7, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    script = textwrap.dedent(f"""
        import numpy as np, torchtrt
        engine = torchtrt.load({str(path)!r})
        assert engine.inputs[0].max_shape == (64, 16), engine.inputs
        np.save({str(tmp_path / 'y.npy')!r}, engine(np.load({str(tmp_path / 'x.npy')!r})))
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300)
    y = np.load(tmp_path / "y.npy")
    np.testing.assert_allclose(y, mlp_reference(x, weights), rtol=1e-5, atol=1e-5)


def test_compiled_module_round_trip(two_heads, tmp_path, rng):
    compiled = torchtrt.compile(two_heads, [torchtrt.Input(min_shape=(1, 12), opt_shape=(2, 12), max_shape=(8, 12)),
                                            torchtrt.Input(min_shape=(1, 6), opt_shape=(2, 6), max_shape=(8, 6))])
    torchtrt.save(compiled, tmp_path / "m.engine")
    loaded = torchtrt.load(str(tmp_path / "m.engine")).as_module()
    a = torch.from_numpy(rng.standard_normal((5, 12)).astype(np.float32))
    b = torch.from_numpy(rng.standard_normal((5, 6)).astype(np.float32))
    for got, want in zip(loaded(a, b), compiled(a, b)):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_bytes_and_pickle_round_trip(onnx_engine, weights, rng):
    x = rng.standard_normal((3, 16)).astype(np.float32)
    from_bytes = torchtrt.load(onnx_engine.serialize())
    from_pickle = pickle.loads(pickle.dumps(onnx_engine))
    want = mlp_reference(x, weights)
    np.testing.assert_allclose(from_bytes(x), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(from_pickle(x), want, rtol=1e-5, atol=1e-5)
