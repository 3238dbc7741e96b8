#!/usr/bin/env python3
"""Writes the ONNX models the Triton backend test and benchmark serve, with seeded weights:

    .venv/bin/python scripts/gen_triton_models.py OUT_DIR

- `cnn.onnx`: x [N,3,8,8] → Conv 3→6 3x3 pad 1 → Relu → MaxPool 2 → Conv 6→8 3x3 pad 1 →
  Relu → GlobalAveragePool → Flatten → Gemm 8→5 = y [N,5], N dynamic (dynamic batching).
- `swish.onnx`: x [N,C] → example::Swish (beta 1.5, the out-of-tree plugin of
  examples/plugin_rust, reached through the plugin fallback importer) → Mul 2 = y [N,C]:
  a model that needs a plugin library to load.
- `nms.onnx`: boxes [1,B,4], scores [1,1,B] → NonMaxSuppression (at most `NMS_MAX` boxes,
  IoU above `NMS_IOU` suppressed, scores at or below `NMS_SCORE` dropped) = y [K,3] int64,
  B dynamic: an output whose length the run decides.
"""

import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEED = 20261202
SWISH_BETA = 1.5
NMS_MAX = 6
NMS_IOU = 0.45
NMS_SCORE = 0.2


def cnn(rng):
    w1 = rng.standard_normal((6, 3, 3, 3)).astype(np.float32) * 0.3
    b1 = rng.standard_normal(6).astype(np.float32) * 0.1
    w2 = rng.standard_normal((8, 6, 3, 3)).astype(np.float32) * 0.2
    b2 = rng.standard_normal(8).astype(np.float32) * 0.1
    wf = rng.standard_normal((5, 8)).astype(np.float32) * 0.5
    bf = rng.standard_normal(5).astype(np.float32) * 0.1
    inits = [
        numpy_helper.from_array(a, n)
        for a, n in [(w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"), (wf, "wf"), (bf, "bf")]
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def swish():
    two = numpy_helper.from_array(np.array(2.0, dtype=np.float32), "two")
    nodes = [
        helper.make_node("Swish", ["x"], ["s"], domain="example", beta=SWISH_BETA),
        helper.make_node("Mul", ["s", "two"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "swish",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "C"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "C"])],
        [two],
    )
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("example", 1)],
    )


def nms():
    consts = [
        numpy_helper.from_array(np.array([NMS_MAX], dtype=np.int64), "max_out"),
        numpy_helper.from_array(np.array([NMS_IOU], dtype=np.float32), "iou"),
        numpy_helper.from_array(np.array([NMS_SCORE], dtype=np.float32), "score"),
    ]
    node = helper.make_node(
        "NonMaxSuppression", ["boxes", "scores", "max_out", "iou", "score"], ["y"])
    graph = helper.make_graph(
        [node],
        "nms",
        [
            helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, "B", 4]),
            helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 1, "B"]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.INT64, ["K", 3])],
        consts,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(SEED)
    for name, model in [("cnn", cnn(rng)), ("swish", swish()), ("nms", nms())]:
        model.ir_version = 8
        onnx.save(model, os.path.join(args.out, f"{name}.onnx"))


if __name__ == "__main__":
    main()
