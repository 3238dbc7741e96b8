"""nn.Module → CompiledModule for a torchvision CNN and a Hugging Face transformer, with a
dynamic batch, matching eager PyTorch."""

import numpy as np
import pytest

import torchtrt
from conftest import torch


def test_torchvision_resnet_dynamic_batch():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).eval()
    compiled = torchtrt.compile(model, [torchtrt.Input(min_shape=(1, 3, 32, 32), opt_shape=(2, 3, 32, 32),
                                                       max_shape=(4, 3, 32, 32))])
    assert isinstance(compiled, torchtrt.CompiledModule)
    assert compiled.engine.inputs[0].min_shape == (1, 3, 32, 32)
    g = torch.Generator().manual_seed(5)
    for batch in (1, 3, 4):
        x = torch.randn(batch, 3, 32, 32, generator=g)
        with torch.no_grad():
            want = model(x)
        got = compiled(x)
        assert got.shape == (batch, 10)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    with pytest.raises(torchtrt.Error, match="outside the engine's range"):
        compiled(torch.randn(5, 3, 32, 32))


def test_huggingface_bert_dynamic_batch():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=64, max_position_embeddings=32)
    torch.manual_seed(0)
    model = transformers.BertModel(cfg).eval()
    spec = [torchtrt.Input(min_shape=(1, 12), opt_shape=(2, 12), max_shape=(8, 12), dtype=torch.int64),
            torchtrt.Input(min_shape=(1, 12), opt_shape=(2, 12), max_shape=(8, 12), dtype=torch.int64)]
    compiled = torchtrt.compile(model, spec)
    g = torch.Generator().manual_seed(9)
    for batch in (1, 3, 8):
        ids = torch.randint(0, 96, (batch, 12), generator=g)
        mask = torch.ones(batch, 12, dtype=torch.int64)
        mask[:, 9:] = 0
        with torch.no_grad():
            want = model(ids, mask)
        got = compiled(ids, mask)
        assert type(got).__name__ == type(want).__name__
        torch.testing.assert_close(got.last_hidden_state, want.last_hidden_state, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(got.pooler_output, want.pooler_output, rtol=1e-4, atol=1e-4)


def test_module_with_example_tensors_is_static(two_heads):
    a, b = torch.randn(3, 12), torch.randn(3, 6)
    compiled = torchtrt.compile(two_heads, [a, b])
    assert compiled.engine.inputs[0].shape == (3, 12)
    with torch.no_grad():
        want = two_heads(a, b)
    for got, exp in zip(compiled(a, b), want):
        torch.testing.assert_close(got, exp, rtol=1e-5, atol=1e-5)
    with pytest.raises(torchtrt.Error, match="input `a`"):
        compiled(torch.randn(4, 12), torch.randn(4, 6))


def test_engine_as_module_returns_tuple(two_heads, pt2_path, rng):
    module = torchtrt.compile(str(pt2_path)).as_module()
    a = torch.from_numpy(rng.standard_normal((2, 12)).astype(np.float32))
    b = torch.from_numpy(rng.standard_normal((2, 6)).astype(np.float32))
    out = module(a, b)
    assert isinstance(out, tuple) and len(out) == 2
    with torch.no_grad():
        torch.testing.assert_close(out[0], two_heads(a, b)[0], rtol=1e-5, atol=1e-5)


def test_dim_that_export_specialized_is_reported(two_heads):
    spec = [torchtrt.Input(min_shape=(1, 12), opt_shape=(2, 12), max_shape=(8, 12)), torch.randn(2, 6)]
    with pytest.raises(torchtrt.Error, match=r"Input `a`: dim 0 is 2 in the exported program"):
        torchtrt.compile(two_heads, spec)
