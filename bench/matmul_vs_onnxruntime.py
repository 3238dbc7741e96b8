#!/usr/bin/env python3
"""MatMul with constant weights (and a bias `Add`) through `torchtrtc bench` and onnxruntime,
in interleaved rounds (`interleaved.py`). Models
(seeded random weights, written to `--work`):

- `qkv`: [1, 128, 768] · [768, 768], BERT-base's attention projections;
- `ffn1`, `ffn2`: [1, 128, 768] · [768, 3072] and [1, 128, 3072] · [3072, 768], its MLP;
- `odd`: [1, 77, 768] · [768, 2304], rows and columns off the tile sizes;
- `chain`: six `ffn1`–`ffn2` pairs with distinct weights (113 MB), so that the weights come
  from memory on every run, as in a whole transformer, not from the last-level cache.

Prints, per model and contender, the minimum, 25th percentile and median of the rounds'
medians (2 threads unless `--threads`). A contender is `LABEL=PATH[,VAR=VALUE...]`.

    .venv/bin/python bench/matmul_vs_onnxruntime.py --torchtrtc base=/tmp/torchtrtc.old \\
        --torchtrtc new=target/release/torchtrtc [--rounds 8] [--runs 10] [--models qkv chain]
"""

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import interleaved

SHAPES = {
    "qkv": (128, [(768, 768)]),
    "ffn1": (128, [(768, 3072)]),
    "ffn2": (128, [(3072, 768)]),
    "odd": (77, [(768, 2304)]),
    "chain": (128, [(768, 3072), (3072, 768)] * 6),
}


def build(name, work):
    """Writes `name`.onnx and its input `name`.npy under `work`; returns their paths."""
    rows, layers = SHAPES[name]
    rng = np.random.default_rng(0)
    inits, nodes, x = [], [], "x"
    for i, (k, n) in enumerate(layers):
        w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        b = (0.1 * rng.standard_normal(n)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes += [helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"]),
                  helper.make_node("Add", [f"m{i}", f"b{i}"], [f"y{i}"])]
        x = f"y{i}"
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, rows, layers[0][0]])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, rows, layers[-1][1]])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = os.path.join(work, name)
    onnx.save(model, path + ".onnx")
    np.save(path + ".npy", rng.standard_normal((1, rows, layers[0][0])).astype(np.float32))
    return path + ".onnx", path + ".npy"


def main():
    parser = interleaved.parser(__doc__, rounds=8, runs=10)
    parser.add_argument("--models", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--work", default="target/bench-matmul")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    contenders = interleaved.start(args, "model")
    for name in args.models:
        model, data = build(name, args.work)
        medians = interleaved.rounds(model, ["--input", f"x={data}"], {"x": np.load(data)}, contenders,
                                     args.rounds, args.runs, args.threads)
        interleaved.row(name, medians)


if __name__ == "__main__":
    main()
