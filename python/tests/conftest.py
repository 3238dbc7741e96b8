"""Shared fixtures: small models made here (ONNX by onnx.helper, .pt2 by torch.export),
random data, and the CUDA skip."""

import numpy as np
import pytest

import torchtrt

torch = pytest.importorskip("torch")


def cuda_ok() -> bool:
    return torch.cuda.is_available() and torchtrt.cuda_available()


needs_cuda = pytest.mark.skipif(not cuda_ok(), reason="no CUDA device for torch and torchtrt")


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def mlp_weights(seed=7, n_in=16, n_hidden=32, n_out=8):
    g = np.random.default_rng(seed)
    w1 = g.standard_normal((n_in, n_hidden)).astype(np.float32) * 0.3
    b1 = g.standard_normal(n_hidden).astype(np.float32) * 0.1
    w2 = g.standard_normal((n_hidden, n_out)).astype(np.float32) * 0.3
    b2 = g.standard_normal(n_out).astype(np.float32) * 0.1
    return w1, b1, w2, b2


def mlp_reference(x, weights):
    w1, b1, w2, b2 = weights
    h = np.maximum(x @ w1 + b1, 0.0)
    return h @ w2 + b2


def make_onnx_mlp(weights, batch="batch"):
    """x[batch,16] → relu(x·W1+b1)·W2+b2 as an ONNX model (opset 17)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    w1, b1, w2, b2 = weights
    inits = [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h2"]),
        helper.make_node("MatMul", ["h2", "w2"], ["y0"]),
        helper.make_node("Add", ["y0", "b2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, w1.shape[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, w2.shape[1]])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


@pytest.fixture(scope="session")
def weights():
    return mlp_weights()


@pytest.fixture(scope="session")
def onnx_model(weights):
    return make_onnx_mlp(weights)


@pytest.fixture(scope="session")
def onnx_path(onnx_model, tmp_path_factory):
    path = tmp_path_factory.mktemp("onnx") / "mlp.onnx"
    path.write_bytes(onnx_model.SerializeToString())
    return path


@pytest.fixture(scope="session")
def onnx_engine(onnx_path):
    return torchtrt.compile(str(onnx_path), [torchtrt.Input(min_shape=(1, 16), opt_shape=(4, 16), max_shape=(64, 16), name="x")])


class TwoHeads(torch.nn.Module):
    """Two inputs sharing a dynamic batch, two outputs."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(3)
        self.lin = torch.nn.Linear(12, 6)
        with torch.no_grad():
            self.lin.weight.copy_(torch.randn(6, 12, generator=g) * 0.3)
            self.lin.bias.copy_(torch.randn(6, generator=g) * 0.1)

    def forward(self, a, b):
        h = torch.tanh(self.lin(a)) * b
        return h, h.sum(dim=1, keepdim=True) + 1.0


@pytest.fixture(scope="session")
def two_heads():
    return TwoHeads().eval()


@pytest.fixture(scope="session")
def pt2_path(two_heads, tmp_path_factory):
    from torch.export import Dim, export

    batch = Dim("batch", min=1, max=32)
    ep = export(two_heads, (torch.randn(4, 12), torch.randn(4, 6)),
                dynamic_shapes=({0: batch}, {0: batch}))
    path = tmp_path_factory.mktemp("pt2") / "two_heads.pt2"
    torch.export.save(ep, str(path))
    return path
