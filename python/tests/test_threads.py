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
