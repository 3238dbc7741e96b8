"""`torch.export` programs: a .pt2 file or bytes → Engine, an ExportedProgram →
CompiledModule, on numpy arrays and CPU tensors."""

import numpy as np
import pytest

import torchtrt
from conftest import torch


def eager(module, a, b):
    with torch.no_grad():
        h, s = module(torch.from_numpy(a), torch.from_numpy(b))
    return h.numpy(), s.numpy()


@pytest.fixture(scope="module")
def pt2_engine(pt2_path):
    return torchtrt.compile(str(pt2_path))


@pytest.mark.parametrize("batch", [1, 7, 32])
def test_pt2_file_runs_numpy(pt2_engine, two_heads, rng, batch):
    a = rng.standard_normal((batch, 12)).astype(np.float32)
    b = rng.standard_normal((batch, 6)).astype(np.float32)
    h, s = pt2_engine(a, b)
    want_h, want_s = eager(two_heads, a, b)
    assert h.shape == (batch, 6) and s.shape == (batch, 1)
    np.testing.assert_allclose(h, want_h, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(s, want_s, rtol=1e-5, atol=1e-5)


def test_pt2_engine_inputs_share_the_batch_symbol(pt2_engine):
    a, b = pt2_engine.inputs
    assert (a.name, b.name) == ("a", "b")
    assert a.shape[0] == b.shape[0] and isinstance(a.shape[0], str)
    assert a.min_shape == (1, 12) and a.max_shape == (32, 12)


def test_pt2_bytes_with_narrowed_input(pt2_path, two_heads, rng):
    engine = torchtrt.compile(pt2_path.read_bytes(), [
        torchtrt.Input(min_shape=(2, 12), opt_shape=(3, 12), max_shape=(4, 12), name="a"),
        torchtrt.Input(min_shape=(2, 6), opt_shape=(3, 6), max_shape=(4, 6), name="b"),
    ])
    assert engine.inputs[0].max_shape == (4, 12)
    a = rng.standard_normal((3, 12)).astype(np.float32)
    b = rng.standard_normal((3, 6)).astype(np.float32)
    np.testing.assert_allclose(engine(a, b)[0], eager(two_heads, a, b)[0], rtol=1e-5, atol=1e-5)
    with pytest.raises(torchtrt.Error, match="outside the engine's range"):
        engine(np.zeros((5, 12), np.float32), np.zeros((5, 6), np.float32))


def test_exported_program_becomes_a_module(two_heads, rng):
    from torch.export import Dim, export

    batch = Dim("batch", min=1, max=8)
    ep = export(two_heads, (torch.randn(2, 12), torch.randn(2, 6)), dynamic_shapes=({0: batch}, {0: batch}))
    compiled = torchtrt.compile(ep)
    assert isinstance(compiled, torch.nn.Module) and isinstance(compiled, torchtrt.CompiledModule)
    a = torch.from_numpy(rng.standard_normal((5, 12)).astype(np.float32))
    b = torch.from_numpy(rng.standard_normal((5, 6)).astype(np.float32))
    h, s = compiled(a, b)
    with torch.no_grad():
        want_h, want_s = two_heads(a, b)
    torch.testing.assert_close(h, want_h, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(s, want_s, rtol=1e-5, atol=1e-5)
    h2, _ = compiled(b=b, a=a)
    torch.testing.assert_close(h2, want_h, rtol=1e-5, atol=1e-5)
