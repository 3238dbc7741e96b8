"""GPU engines (skipped without CUDA): device="cuda", f16, CUDA tensors in and out on
PyTorch's current stream, written in place."""

import numpy as np
import pytest

import torchtrt
from conftest import mlp_reference, needs_cuda, torch

pytestmark = needs_cuda


@pytest.fixture(scope="module")
def cuda_engine(onnx_path):
    return torchtrt.compile(onnx_path, [torchtrt.Input(min_shape=(1, 16), opt_shape=(8, 16), max_shape=(64, 16))],
                            device="cuda")


def test_cuda_tensors_in_and_out(cuda_engine, weights, rng):
    assert cuda_engine.device == "cuda:0"
    x = rng.standard_normal((9, 16)).astype(np.float32)
    xd = torch.from_numpy(x).cuda()
    y = cuda_engine(xd)
    assert y.is_cuda and y.device.index == 0 and y.dtype == torch.float32
    np.testing.assert_allclose(y.cpu().numpy(), mlp_reference(x, weights), rtol=1e-4, atol=1e-4)


def test_outputs_written_in_place(cuda_engine, weights, rng):
    x = torch.from_numpy(rng.standard_normal((4, 16)).astype(np.float32)).cuda()
    out = torch.full((4, 8), float("nan"), device="cuda")
    ptr = out.data_ptr()
    (y,) = cuda_engine._native.run_list([x], [out])
    assert y is out and y.data_ptr() == ptr
    np.testing.assert_allclose(y.cpu().numpy(), mlp_reference(x.cpu().numpy(), weights), rtol=1e-4, atol=1e-4)


def test_numpy_into_a_cuda_engine(cuda_engine, weights, rng):
    x = rng.standard_normal((3, 16)).astype(np.float32)
    y = cuda_engine(x)
    assert isinstance(y, np.ndarray)
    np.testing.assert_allclose(y, mlp_reference(x, weights), rtol=1e-4, atol=1e-4)


def test_side_stream_is_respected(cuda_engine, weights, rng):
    x = rng.standard_normal((64, 16)).astype(np.float32)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        xd = torch.from_numpy(x).cuda(non_blocking=False)
        y = cuda_engine(xd) * 1.0
    s.synchronize()
    np.testing.assert_allclose(y.cpu().numpy(), mlp_reference(x, weights), rtol=1e-4, atol=1e-4)


def test_subclass_views_and_grad_tensors_on_a_side_stream(cuda_engine, weights, rng):
    x = rng.standard_normal((33, 16)).astype(np.float32)
    want = mlp_reference(x[1:], weights)

    class Tagged(torch.Tensor):
        pass

    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        base = torch.from_numpy(x).cuda()
        for t in (base[1:], base[1:].clone().requires_grad_(), base[1:].clone().as_subclass(Tagged)):
            y = cuda_engine(t)
            assert y.is_cuda and type(y) is torch.Tensor
            np.testing.assert_allclose(y.cpu().numpy(), want, rtol=1e-4, atol=1e-4)


def test_f16_module_on_cuda(two_heads):
    model = two_heads.cuda()
    compiled = torchtrt.compile(model, [torchtrt.Input(min_shape=(1, 12), opt_shape=(4, 12), max_shape=(16, 12)),
                                        torchtrt.Input(min_shape=(1, 6), opt_shape=(4, 6), max_shape=(16, 6))],
                                device=torch.device("cuda:0"), enabled_precisions={torch.float16})
    assert compiled.engine.summary()["precision"] == "f16"
    a, b = torch.randn(5, 12, device="cuda"), torch.randn(5, 6, device="cuda")
    with torch.no_grad():
        want = model(a, b)
    for got, exp in zip(compiled(a, b), want):
        assert got.is_cuda
        torch.testing.assert_close(got, exp, rtol=2e-2, atol=2e-2)
    model.cpu()


def test_cuda_tensor_into_cpu_engine_is_refused(onnx_engine):
    with pytest.raises(torchtrt.Error, match=r"input `x` is on cuda:0, the engine runs on cpu"):
        onnx_engine(torch.zeros(2, 16, device="cuda"))


def test_threads_on_cuda(cuda_engine, weights):
    import threading

    errors = []

    def work(seed):
        g = np.random.default_rng(seed)
        try:
            for _ in range(20):
                x = g.standard_normal((1 + seed, 16)).astype(np.float32)
                y = cuda_engine(torch.from_numpy(x).cuda())
                np.testing.assert_allclose(y.cpu().numpy(), mlp_reference(x, weights), rtol=1e-4, atol=1e-4)
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert not errors, errors[0]
