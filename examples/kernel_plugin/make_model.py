"""Writes the example's model and data into OUT_DIR:

- model.onnx: x[batch, seq, 64] -> MatMul -> SwiGLU (domain "example", alpha 1.702) ->
  MatMul -> + x, the MLP block of a transformer with its activation as a kernel plugin;
  seeded random weights, dynamic batch and sequence;
- x.npy and ref.npy: an input of shape [3, 10, 64] and numpy's output for it;
- app_ref.npy: numpy's output for the input examples/runtime_app_c feeds at the engine's
  opt shape [2, 16, 64] (element i is ((i * 7919) % 2001 - 1000) / 1000).
"""

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HIDDEN, INNER, ALPHA = 64, 128, 1.702


def mlp(x, w1, w2):
    """The model in numpy (float64, then float32)."""
    h = x.astype(np.float64) @ w1
    a, b = h[..., :INNER], h[..., INNER:]
    g = a / (1.0 + np.exp(-ALPHA * a)) * b
    return (g @ w2 + x).astype(np.float32)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    w1 = (rng.standard_normal((HIDDEN, 2 * INNER)) / np.sqrt(HIDDEN)).astype(np.float32)
    w2 = (rng.standard_normal((INNER, HIDDEN)) / np.sqrt(INNER)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("SwiGLU", ["h"], ["g"], domain="example", alpha=ALPHA),
        helper.make_node("MatMul", ["g", "w2"], ["m"]),
        helper.make_node("Add", ["m", "x"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "swiglu_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", HIDDEN])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", HIDDEN])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("example", 1)],
    )
    onnx.save(model, out / "model.onnx")
    x = rng.uniform(-2.0, 2.0, (3, 10, HIDDEN)).astype(np.float32)
    np.save(out / "x.npy", x)
    np.save(out / "ref.npy", mlp(x, w1, w2))
    n = 2 * 16 * HIDDEN
    app_x = ((np.arange(n) * 7919) % 2001 - 1000).astype(np.float32) / np.float32(1000)
    np.save(out / "app_ref.npy", mlp(app_x.reshape(2, 16, HIDDEN), w1, w2))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
