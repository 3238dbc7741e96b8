#!/usr/bin/env python3
"""Single convolutions on the CPU through `torchtrtc bench` and onnxruntime, in interleaved
rounds (`interleaved.py`): one-node models (`Conv` with bias, then `Relu` or `x·Sigmoid(x)`
where the layer has an activation; seeded random weights) written to `--work`. Layers are
named `C-M-kK-sS-HxW[-dw][-dD][-relu|-silu]` (batch from `--batch`; `dw`: depthwise, M = C
groups; `dD`: dilation D, padded to keep the size); the defaults are EfficientNet-B0's
and ResNet-50's heaviest shapes. Prints, per layer and contender, the minimum, 25th
percentile and median of the rounds' medians (2 threads unless `--threads`).

    .venv/bin/python bench/conv_vs_onnxruntime.py --torchtrtc base=/tmp/torchtrtc.old \\
        --torchtrtc new=target/release/torchtrtc [--layers 672-112-k1-s1-14x14] [--rounds 8]
"""

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import interleaved

LAYERS = [
    "16-96-k1-s1-112x112-silu",
    "144-24-k1-s1-56x56",
    "672-112-k1-s1-14x14",
    "112-672-k1-s1-14x14-silu",
    "672-192-k1-s1-7x7",
    "1152-192-k1-s1-7x7",
    "320-1280-k1-s1-7x7-silu",
    "64-64-k3-s1-56x56-relu",
    "256-256-k3-s1-14x14-relu",
]


def build(name, batch, work):
    """Writes the layer's model and input under `work`; returns their paths."""
    c, m, k, s, hw, *act = name.split("-")
    c, m, k, s = int(c), int(m), int(k[1:]), int(s[1:])
    h, w = (int(v) for v in hw.split("x"))
    group = c if act[:1] == ["dw"] else 1
    act = act[1:] if group > 1 else act
    dilation = int(act[0][1:]) if act[:1] and act[0][:1] == "d" else 1
    act = act[1:] if dilation > 1 else act
    pad = dilation * (k // 2)
    rng = np.random.default_rng(0)
    fan_in = c // group * k * k
    weights = (rng.standard_normal((m, c // group, k, k)) / np.sqrt(fan_in)).astype(np.float32)
    bias = (0.1 * rng.standard_normal(m)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[k, k], strides=[s, s],
                              pads=[pad] * 4, group=group, dilations=[dilation] * 2)]
    if act == ["relu"]:
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    elif act == ["silu"]:
        nodes += [helper.make_node("Sigmoid", ["c"], ["g"]), helper.make_node("Mul", ["c", "g"], ["y"])]
    else:
        nodes[0].output[0] = "y"
    span = dilation * (k - 1) + 1
    oh, ow = (h + 2 * pad - span) // s + 1, (w + 2 * pad - span) // s + 1
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, c, h, w])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, m, oh, ow])],
        [numpy_helper.from_array(weights, "w"), numpy_helper.from_array(bias, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = os.path.join(work, f"{name}-b{batch}")
    onnx.save(model, path + ".onnx")
    np.save(path + ".npy", rng.standard_normal((batch, c, h, w)).astype(np.float32))
    return path + ".onnx", path + ".npy"


def main():
    parser = interleaved.parser(__doc__, rounds=8, runs=50)
    parser.add_argument("--layers", nargs="+", default=LAYERS)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--work", default="target/bench-conv")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    contenders = interleaved.start(args, "layer", f", batch {args.batch}")
    for name in args.layers:
        model, data = build(name, args.batch, args.work)
        medians = interleaved.rounds(model, ["--input", f"x={data}"], {"x": np.load(data)}, contenders,
                                     args.rounds, args.runs, args.threads, warmup=5)
        interleaved.row(name, medians)


if __name__ == "__main__":
    main()
