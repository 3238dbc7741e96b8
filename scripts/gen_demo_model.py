#!/usr/bin/env python3
"""Writes the demo model `models/demo/demo.onnx`, an input and the reference output.

    .venv/bin/python scripts/gen_demo_model.py [--out models/demo]

The model is a small image network built the way PyTorch exports it, so that compiling it
uses every seed plugin:

    x [1,3,16,16]
    → Conv 3→8, 3x3, pad 1                        (core layer)
    → Resize ×2, linear, half_pixel               → torch_tensorrt::Interpolate (bilinear)
    → InstanceNormalization                       → InstanceNormalization_TRT
    → x·0.5·(1 + erf(x/√2))  (exact GELU)         → CustomGeluPluginDynamic
    → torch_tensorrt::Interpolate node, adaptive_max_pool2d to 7x7 (7 does not divide 32)
                                                  → the plugin fallback importer
    → x / expand(clip(ReduceL2(x, dim 1), eps))   (F.normalize)
                                                  → torch_tensorrt::NormalizePlugin
    = y [1,8,7,7]

The reference output is computed by the plain numpy functions below (PyTorch semantics), in
float64 from the float32 input and weights, then rounded to float32.
"""

import argparse
import math
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED = 20240601
CHANNELS = 8
POOLED = (7, 7)
IN_EPS = 1e-5
NORM_EPS = 1e-12


def conv2d(x, w, b):
    """`F.conv2d(x, w, b, padding=1)` for a 3x3 kernel, stride 1."""
    n, _, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, w.shape[0], h, wd))
    for dy in range(3):
        for dx in range(3):
            patch = xp[:, :, dy:dy + h, dx:dx + wd]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, dy, dx])
    return out + b[None, :, None, None]


def bilinear_axis(size_in, size_out):
    """Source indices and weights of `F.interpolate(mode="bilinear", align_corners=False)`
    along one axis: src = (dst + 0.5) / scale - 0.5, clamped at 0."""
    scale = size_out / size_in
    src = np.maximum((np.arange(size_out) + 0.5) / scale - 0.5, 0.0)
    i0 = np.floor(src).astype(int)
    i1 = np.minimum(i0 + 1, size_in - 1)
    return i0, i1, src - i0


def upsample_bilinear(x, factor):
    """`F.interpolate(x, scale_factor=factor, mode="bilinear", align_corners=False)`."""
    h, w = x.shape[2:]
    y0, y1, ly = bilinear_axis(h, h * factor)
    x0, x1, lx = bilinear_axis(w, w * factor)
    rows = x[:, :, y0, :] * (1 - ly)[:, None] + x[:, :, y1, :] * ly[:, None]
    return rows[:, :, :, x0] * (1 - lx) + rows[:, :, :, x1] * lx


def instance_norm(x, scale, bias, eps):
    """`F.instance_norm(x, weight=scale, bias=bias, eps=eps)` (biased variance)."""
    mean = x.mean(axis=(2, 3), keepdims=True)
    var = x.var(axis=(2, 3), keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * scale[None, :, None, None] + bias[None, :, None, None]


def gelu(x):
    """`F.gelu(x)` (approximate="none"): x·Φ(x)."""
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def adaptive_max_pool2d(x, out):
    """`F.adaptive_max_pool2d(x, out)`: window i spans [floor(i·in/out), ceil((i+1)·in/out))."""
    h, w = x.shape[2:]
    oh, ow = out
    y = np.empty(x.shape[:2] + (oh, ow))
    for i in range(oh):
        r0, r1 = (i * h) // oh, -(-((i + 1) * h) // oh)
        for j in range(ow):
            c0, c1 = (j * w) // ow, -(-((j + 1) * w) // ow)
            y[:, :, i, j] = x[:, :, r0:r1, c0:c1].max(axis=(2, 3))
    return y


def normalize(x, eps):
    """`F.normalize(x, p=2, dim=1, eps=eps)`."""
    norm = np.sqrt((x * x).sum(axis=1, keepdims=True))
    return x / np.maximum(norm, eps)


def reference(x, p):
    y = conv2d(x, p["conv.weight"], p["conv.bias"])
    y = upsample_bilinear(y, 2)
    y = instance_norm(y, p["norm.scale"], p["norm.bias"], IN_EPS)
    y = gelu(y)
    y = adaptive_max_pool2d(y, POOLED)
    return normalize(y, NORM_EPS)


def scalar(name, value):
    return numpy_helper.from_array(np.array(value, dtype=np.float32), name)


def build_model(p):
    inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in p.items()]
    inits += [
        numpy_helper.from_array(np.array([1, 1, 2, 2], dtype=np.float32), "resize.scales"),
        scalar("gelu.sqrt2", math.sqrt(2.0)),
        scalar("gelu.one", 1.0),
        scalar("gelu.half", 0.5),
        scalar("normalize.eps", NORM_EPS),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["conv"], name="conv",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Resize", ["conv", "", "resize.scales"], ["up"], name="upsample",
                         mode="linear", coordinate_transformation_mode="half_pixel"),
        helper.make_node("InstanceNormalization", ["up", "norm.scale", "norm.bias"], ["inorm"],
                         name="instance_norm", epsilon=IN_EPS),
        helper.make_node("Div", ["inorm", "gelu.sqrt2"], ["gelu.div"], name="gelu/div"),
        helper.make_node("Erf", ["gelu.div"], ["gelu.erf"], name="gelu/erf"),
        helper.make_node("Add", ["gelu.erf", "gelu.one"], ["gelu.add"], name="gelu/add"),
        helper.make_node("Mul", ["inorm", "gelu.add"], ["gelu.mul"], name="gelu/mul"),
        helper.make_node("Mul", ["gelu.mul", "gelu.half"], ["gelu"], name="gelu/mul_half"),
        helper.make_node("Interpolate", ["gelu"], ["pooled"], name="adaptive_max_pool",
                         domain="torch_tensorrt", mode="adaptive_max_pool2d",
                         out_size=list(POOLED)),
        helper.make_node("ReduceL2", ["pooled"], ["normalize.norm"], name="normalize/norm",
                         axes=[1], keepdims=1),
        helper.make_node("Clip", ["normalize.norm", "normalize.eps"], ["normalize.clip"],
                         name="normalize/clamp_min"),
        helper.make_node("Shape", ["pooled"], ["normalize.shape"], name="normalize/shape"),
        helper.make_node("Expand", ["normalize.clip", "normalize.shape"], ["normalize.expand"],
                         name="normalize/expand"),
        helper.make_node("Div", ["pooled", "normalize.expand"], ["y"], name="normalize/div"),
    ]
    graph = helper.make_graph(
        nodes,
        "torchtrt_demo",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, CHANNELS, *POOLED])],
        initializer=inits,
    )
    model = helper.make_model(
        graph,
        producer_name="scripts/gen_demo_model.py",
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("torch_tensorrt", 1)],
    )
    model.ir_version = 8
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "models", "demo"))
    out = ap.parse_args().out
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(SEED)
    params = {
        "conv.weight": rng.normal(0, 0.4, (CHANNELS, 3, 3, 3)).astype(np.float32),
        "conv.bias": rng.normal(0, 0.1, CHANNELS).astype(np.float32),
        "norm.scale": rng.uniform(0.5, 1.5, CHANNELS).astype(np.float32),
        "norm.bias": rng.normal(0, 0.2, CHANNELS).astype(np.float32),
    }
    x = rng.standard_normal((1, 3, 16, 16)).astype(np.float32)
    model = build_model(params)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, os.path.join(out, "demo.onnx"))
    p64 = {k: v.astype(np.float64) for k, v in params.items()}
    y = reference(x.astype(np.float64), p64).astype(np.float32)
    np.save(os.path.join(out, "x.npy"), x)
    np.save(os.path.join(out, "y.npy"), y)
    print(f"wrote {out}/demo.onnx, x.npy {x.shape}, y.npy {y.shape}")


if __name__ == "__main__":
    main()
