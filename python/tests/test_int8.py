"""INT8: ``enabled_precisions={torch.int8}`` with a calibrator, as Torch-TensorRT's PTQ: a
small CNN (convolutions, batch norm, ReLU, a linear head) compiled from a module, from an
exported program with a dict-batched calibrator, and from ONNX bytes runs its convolutions
and linear layer on integers and stays close to eager; misuse is a clear error."""

import io

import numpy as np
import pytest

import torchtrt
from conftest import torch


class SmallNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.conv1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(16)
        self.conv2 = torch.nn.Conv2d(16, 24, 3, stride=2, padding=1)
        self.fc = torch.nn.Linear(24, 10)
        for p in self.parameters():
            p.data = torch.randn(p.shape, generator=g) / max(p[0].numel(), 1) ** 0.5
        self.bn.running_mean = 0.1 * torch.randn(16, generator=g)
        self.bn.running_var = 0.5 + torch.rand(16, generator=g)
        self.eval()

    def forward(self, x):
        x = torch.relu(self.bn(self.conv1(x)))
        x = torch.relu(self.conv2(x))
        return self.fc(x.mean(dim=(2, 3)))


def images(seed, n=4):
    return torch.randn(n, 3, 16, 16, generator=torch.Generator().manual_seed(seed))


def relative_error(got, want):
    return float(np.linalg.norm(np.asarray(got) - np.asarray(want)) / np.linalg.norm(np.asarray(want)))


def kinds(engine):
    return engine.summary()["layer_kinds"]


def test_module_compiles_to_integer_layers_close_to_eager():
    net = SmallNet()
    x = images(1)
    compiled = torchtrt.compile(net, [x], enabled_precisions={torch.int8},
                                calibrator=[images(s) for s in range(10, 14)])
    k = kinds(compiled.engine)
    assert k.get("QuantizedConvolution") == 2 and k.get("QuantizedMatMul") == 1, k
    with torch.no_grad():
        want = net(x)
    assert relative_error(compiled(x), want) < 0.05


def test_program_with_dict_batches_and_onnx_bytes():
    net = SmallNet()
    x = images(2)
    ep = torch.export.export(net, (x,))
    name = ep.graph_signature.user_inputs[0]
    batches = [{name: images(s).numpy()} for s in range(20, 23)]
    compiled = torchtrt.compile(ep, enabled_precisions={torch.int8, torch.float32}, calibrator=batches)
    assert kinds(compiled.engine).get("QuantizedConvolution") == 2
    with torch.no_grad():
        want = net(x)
    assert relative_error(compiled(x), want) < 0.05
    buf = io.BytesIO()
    torch.onnx.export(net, (x,), buf, input_names=["x"], dynamo=False)
    engine = torchtrt.compile(buf.getvalue(), enabled_precisions={torch.int8},
                              calibrator=(images(s) for s in range(30, 33)))
    assert kinds(engine).get("QuantizedConvolution") == 2
    assert relative_error(engine(x.numpy()), want) < 0.05


def test_int8_misuse_is_a_clear_error():
    net = SmallNet()
    x = images(3)
    with pytest.raises(torchtrt.Error, match="needs a calibrator"):
        torchtrt.compile(net, [x], enabled_precisions={torch.int8})
    with pytest.raises(torchtrt.Error, match="only used with torch.int8"):
        torchtrt.compile(net, [x], calibrator=[x])
    with pytest.raises(torchtrt.Error, match="runs on CUDA; on the CPU int8 runs with f32"):
        torchtrt.compile(net, [x], enabled_precisions={torch.int8, torch.float16}, calibrator=[x])
    with pytest.raises(torchtrt.Error, match="int8 runs with f32 or f16"):
        torchtrt.compile(net, [x], enabled_precisions={torch.int8, torch.bfloat16}, calibrator=[x])
    with pytest.raises(torchtrt.Error, match="calibration batch"):
        torchtrt.compile(net, [x], enabled_precisions={torch.int8}, calibrator=[images(4, n=9)[:, :2]])
