#!/usr/bin/env python3
"""Writes golden input/expected `.npy` pairs for the built-in plugins and a manifest
(`manifest.json`) listing each case: plugin key, fields (typed), input and expected file,
dtype, tolerance and the source of the expected values.

    python scripts/gen_plugin_goldens.py [--source auto|torch|onnx] [--out DIR]

Expected values come from PyTorch when `import torch` works (`--source auto`, the default,
or `torch`), else from ONNX's ReferenceEvaluator for what ONNX defines (Resize, LpNormalization,
ReduceL1/L2/Max, InstanceNormalization, Relu/LeakyRelu, Gelu; p = 1 normalisation as
ReduceL1 + Div, as the reference LpNormalization forgets the absolute value for p = 1) and
from plain numpy for the
rest (adaptive pooling, other p-norms, F.normalize's eps). Everything is computed in float64
from the exact float32 (or float16 / bfloat16) input values, then rounded to float32.
`crates/torchtrt-plugins/tests/golden.rs` runs every case of the manifest.
"""

import argparse
import json
import math
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(ROOT, "crates", "torchtrt-plugins", "tests", "golden")
TOL = {"f32": (1e-5, 1e-5), "f16": (2e-3, 1e-2), "bf16": (1e-2, 2e-2)}


def rng_values(shape, seed, lo=-3.0, hi=3.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


def to_bf16_values(x):
    """Rounds float32 values to the nearest bfloat16 (ties to even), kept as float32."""
    b = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    return (b.astype(np.uint32) << 16).view(np.float32)


def as_dtype(x, dtype):
    """The input as stored (float32 or float16 .npy) and its exact values in float64."""
    if dtype == "f16":
        stored = x.astype(np.float16)
    elif dtype == "bf16":
        stored = to_bf16_values(x)
    else:
        stored = x.astype(np.float32)
    return stored, stored.astype(np.float64)


# ---------------------------------------------------------------- onnx / numpy references

def onnx_run(nodes, x, inits=(), opset=20):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    graph = helper.make_graph(
        nodes, "golden",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return ReferenceEvaluator(model).run(None, {"x": x})[0]


def node(op, inputs, output="y", **attrs):
    from onnx import helper
    return helper.make_node(op, inputs, [output], **attrs)


def onnx_resize(x, mode, coord, sizes=None, scales=None, nearest_mode="floor", cubic_a=-0.75):
    attrs = {"mode": mode, "coordinate_transformation_mode": coord}
    if mode == "nearest":
        attrs["nearest_mode"] = nearest_mode
    if mode == "cubic":
        attrs["cubic_coeff_a"] = cubic_a
    if sizes is not None:
        full = np.array(list(x.shape[:2]) + list(sizes), np.int64)
        return onnx_run([node("Resize", ["x", "", "", "sizes"], **attrs)], x, [("sizes", full)])
    full = np.array([1.0, 1.0] + list(scales), np.float32)
    return onnx_run([node("Resize", ["x", "", "scales"], **attrs)], x, [("scales", full)])


def np_adaptive_pool(x, out, reduce):
    spatial = x.shape[2:]
    y = np.empty(x.shape[:2] + tuple(out))
    for idx in np.ndindex(*out):
        sl = []
        for i, n_in, n_out in zip(idx, spatial, out):
            sl.append(slice((i * n_in) // n_out, -((-(i + 1) * n_in) // n_out)))
        y[(Ellipsis,) + idx] = reduce(x[(Ellipsis,) + tuple(sl)], axis=tuple(range(2, x.ndim)))
    return y


def np_norm(x, axes, p, keepdims):
    a = np.abs(x)
    if math.isinf(p):
        return a.max(axis=tuple(axes), keepdims=keepdims)
    return (a ** p).sum(axis=tuple(axes), keepdims=keepdims) ** (1.0 / p)


# ---------------------------------------------------------------------- torch references

def torch_expected(case, x):
    import torch
    import torch.nn.functional as F

    t = torch.from_numpy(x)
    k, f = case["plugin"], case["fields"]
    val = {name: (float(v["value"]) if v["value"] in ("inf", "-inf", "nan") else v["value"])
           for name, v in f.items()}
    if k == "CustomGeluPluginDynamic":
        if "bias" in val:
            t = t + torch.tensor(val["bias"], dtype=torch.float64)
        return F.gelu(t, approximate=val.get("approximate", "none")).numpy()
    if k == "InstanceNormalization_TRT":
        y = F.instance_norm(t, weight=torch.tensor(val["scales"], dtype=torch.float64),
                            bias=torch.tensor(val["bias"], dtype=torch.float64),
                            eps=val["epsilon"])
        if val.get("relu", 0):
            y = F.leaky_relu(y, val.get("alpha", 0.0))
        return y.numpy()
    if k == "NormalizePlugin":
        p, axes = val.get("order", 2.0), val["axes"]
        if val.get("mode", "norm") == "normalize":
            n = torch.linalg.vector_norm(t, ord=p, dim=axes, keepdim=True)
            return (t / n.clamp_min(val.get("eps", 0.0))).numpy()
        return torch.linalg.vector_norm(t, ord=p, dim=axes,
                                        keepdim=bool(val.get("keep_dims", 0))).numpy()
    if k == "Interpolate":
        mode = val["mode"]
        if mode.startswith("adaptive_"):
            return getattr(F, mode)(t, tuple(val["out_size"])).numpy()
        kwargs = {"mode": mode}
        if mode != "nearest":
            kwargs["align_corners"] = bool(val.get("align_corners", 0))
        if val.get("use_scales", 0):
            kwargs["scale_factor"] = tuple(val["scales"])
            kwargs["recompute_scale_factor"] = False
        else:
            kwargs["size"] = tuple(val["out_size"])
        return F.interpolate(t, **kwargs).numpy()
    raise ValueError(k)


# ----------------------------------------------------------------------------- the cases

def fld(ty, value):
    """A typed field; non-finite floats are written as the strings "inf", "-inf", "nan"."""
    def enc(v):
        return str(v) if isinstance(v, float) and not math.isfinite(v) else v
    return {"type": ty, "value": [enc(v) for v in value] if isinstance(value, list) else enc(value)}


def cases():
    """(name, plugin, namespace, fields, shape, dtype, onnx/numpy reference, source)."""
    out = []

    def add(name, plugin, ns, fields, shape, ref, source, dtype="f32", seed=None, lo=-3, hi=3):
        out.append(dict(name=name, plugin=plugin, namespace=ns, fields=fields, shape=shape,
                        ref=ref, source=source, dtype=dtype,
                        seed=len(out) + 1 if seed is None else seed, lo=lo, hi=hi))

    # CustomGeluPluginDynamic
    g = "CustomGeluPluginDynamic"
    add("gelu_erf", g, "", {"approximate": fld("string", "none")}, [2, 3, 40],
        lambda x: onnx_run([node("Gelu", ["x"])], x), "onnx.reference", lo=-7, hi=7)
    add("gelu_tanh", g, "", {"approximate": fld("string", "tanh")}, [2, 3, 40],
        lambda x: onnx_run([node("Gelu", ["x"], approximate="tanh")], x), "onnx.reference",
        lo=-7, hi=7)
    bias = [round(v, 3) for v in rng_values([7], 99, -1, 1).tolist()]
    add("gelu_erf_bias", g, "", {"approximate": fld("string", "none"), "bias": fld("f32", bias)},
        [5, 7], lambda x: onnx_run([node("Add", ["x", "b"], "s"), node("Gelu", ["s"])], x,
                                   [("b", np.array(bias, np.float32).astype(np.float64))]),
        "onnx.reference")
    add("gelu_erf_f16", g, "", {"approximate": fld("string", "none")}, [4, 33],
        lambda x: onnx_run([node("Gelu", ["x"])], x), "onnx.reference", dtype="f16")
    add("gelu_tanh_bf16", g, "", {"approximate": fld("string", "tanh")}, [4, 33],
        lambda x: onnx_run([node("Gelu", ["x"], approximate="tanh")], x), "onnx.reference",
        dtype="bf16")

    # InstanceNormalization_TRT
    def inorm(c, eps, relu=0, alpha=0.0, seed=0):
        s = [round(v, 3) for v in rng_values([c], 100 + seed, 0.2, 2).tolist()]
        b = [round(v, 3) for v in rng_values([c], 200 + seed, -1, 1).tolist()]
        fields = {"epsilon": fld("f32", eps), "scales": fld("f32", s), "bias": fld("f32", b),
                  "relu": fld("i32", relu), "alpha": fld("f32", alpha)}
        inits = [("s", np.array(s, np.float32).astype(np.float64)),
                 ("b", np.array(b, np.float32).astype(np.float64))]
        nodes = [node("InstanceNormalization", ["x", "s", "b"], "n" if relu else "y",
                      epsilon=eps)]
        if relu:
            nodes.append(node("LeakyRelu", ["n"], alpha=alpha) if alpha else node("Relu", ["n"]))
        return fields, (lambda x: onnx_run(nodes, x, inits))

    n = "InstanceNormalization_TRT"
    f, r = inorm(3, 1e-5, seed=1)
    add("instance_norm_4d", n, "", f, [2, 3, 5, 7], r, "onnx.reference", lo=-5, hi=9)
    f, r = inorm(4, 1e-3, relu=1, seed=2)
    add("instance_norm_3d_relu", n, "", f, [2, 4, 19], r, "onnx.reference")
    f, r = inorm(2, 1e-5, relu=1, alpha=0.2, seed=3)
    add("instance_norm_5d_leaky", n, "", f, [1, 2, 3, 4, 5], r, "onnx.reference")
    f, r = inorm(3, 1e-5, seed=4)
    add("instance_norm_4d_f16", n, "", f, [2, 3, 6, 5], r, "onnx.reference", dtype="f16")

    # NormalizePlugin
    p = "NormalizePlugin"

    def nfields(order, axes, keep=0, mode="norm", eps=0.0):
        return {"order": fld("f32", order), "axes": fld("i32", axes), "keep_dims": fld("i32", keep),
                "eps": fld("f32", eps), "mode": fld("string", mode)}

    add("normalize_l2_axis1", p, "torch_tensorrt", nfields(2.0, [1], mode="normalize"),
        [2, 6, 5, 4], lambda x: onnx_run([node("LpNormalization", ["x"], axis=1, p=2)], x),
        "onnx.reference")
    add("normalize_l1_last", p, "torch_tensorrt", nfields(1.0, [-1], mode="normalize"),
        [3, 4, 9], lambda x: onnx_run([node("ReduceL1", ["x", "axes"], "n", keepdims=1),
                                       node("Div", ["x", "n"])], x,
                                      [("axes", np.array([-1], np.int64))]), "onnx.reference")
    add("normalize_l2_axis1_f16", p, "torch_tensorrt", nfields(2.0, [1], mode="normalize"),
        [2, 8, 3, 5], lambda x: onnx_run([node("LpNormalization", ["x"], axis=1, p=2)], x),
        "onnx.reference", dtype="f16")
    add("norm_l2_axes12_keep", p, "torch_tensorrt", nfields(2.0, [1, 2], keep=1), [3, 4, 5, 6],
        lambda x: onnx_run([node("ReduceL2", ["x", "axes"], keepdims=1)], x,
                           [("axes", np.array([1, 2], np.int64))]), "onnx.reference")
    add("norm_l1_axis0", p, "torch_tensorrt", nfields(1.0, [0]), [5, 4, 3],
        lambda x: onnx_run([node("ReduceL1", ["x", "axes"], keepdims=0)], x,
                           [("axes", np.array([0], np.int64))]), "onnx.reference")
    add("norm_inf_axes02", p, "torch_tensorrt", nfields(float("inf"), [0, -1]), [3, 4, 7],
        lambda x: onnx_run([node("Abs", ["x"], "a"), node("ReduceMax", ["a", "axes"], keepdims=0)],
                           x, [("axes", np.array([0, 2], np.int64))]), "onnx.reference")
    add("norm_p3_axis1", p, "torch_tensorrt", nfields(3.0, [1]), [4, 10, 3],
        lambda x: np_norm(x, [1], 3.0, False), "numpy")
    add("normalize_p2_eps", p, "torch_tensorrt", nfields(2.0, [1], mode="normalize", eps=0.5),
        [6, 3], lambda x: x / np.maximum(np_norm(x, [1], 2.0, True), 0.5), "numpy",
        lo=-0.3, hi=0.3)

    # Interpolate (base fields: PyTorch semantics, expected values from ONNX Resize)
    i = "Interpolate"

    def ifields(mode, size=None, scales=None, align=0):
        f = {"mode": fld("string", mode), "align_corners": fld("i32", align),
             "use_scales": fld("i32", 1 if scales else 0)}
        if size:
            f["out_size"] = fld("i64", size)
        if scales:
            f["scales"] = fld("f64", scales)
        return f

    add("interp_bilinear", i, "torch_tensorrt", ifields("bilinear", [7, 9]), [1, 2, 4, 5],
        lambda x: onnx_resize(x, "linear", "pytorch_half_pixel", sizes=[7, 9]), "onnx.reference")
    add("interp_bilinear_align", i, "torch_tensorrt", ifields("bilinear", [7, 9], align=1),
        [1, 2, 4, 5], lambda x: onnx_resize(x, "linear", "align_corners", sizes=[7, 9]),
        "onnx.reference")
    add("interp_bilinear_down", i, "torch_tensorrt", ifields("bilinear", [3, 4]), [2, 1, 7, 9],
        lambda x: onnx_resize(x, "linear", "pytorch_half_pixel", sizes=[3, 4]), "onnx.reference")
    add("interp_bilinear_scales", i, "torch_tensorrt", ifields("bilinear", scales=[2.0, 1.5]),
        [1, 2, 4, 6], lambda x: onnx_resize(x, "linear", "pytorch_half_pixel",
                                           scales=[2.0, 1.5]), "onnx.reference")
    add("interp_nearest", i, "torch_tensorrt", ifields("nearest", [8, 7]), [1, 2, 4, 5],
        lambda x: onnx_resize(x, "nearest", "asymmetric", sizes=[8, 7]), "onnx.reference")
    add("interp_bicubic", i, "torch_tensorrt", ifields("bicubic", [7, 8]), [1, 2, 4, 5],
        lambda x: onnx_resize(x, "cubic", "pytorch_half_pixel", sizes=[7, 8]), "onnx.reference")
    add("interp_bicubic_align", i, "torch_tensorrt", ifields("bicubic", [7, 8], align=1),
        [1, 2, 4, 5], lambda x: onnx_resize(x, "cubic", "align_corners", sizes=[7, 8]),
        "onnx.reference")
    add("interp_linear_1d", i, "torch_tensorrt", ifields("linear", [11]), [2, 3, 6],
        lambda x: onnx_resize(x, "linear", "pytorch_half_pixel", sizes=[11]), "onnx.reference")
    add("interp_trilinear", i, "torch_tensorrt", ifields("trilinear", [5, 6, 4]),
        [1, 2, 3, 4, 5], lambda x: onnx_resize(x, "linear", "pytorch_half_pixel",
                                              sizes=[5, 6, 4]), "onnx.reference")
    add("interp_bilinear_f16", i, "torch_tensorrt", ifields("bilinear", [7, 9]), [1, 2, 4, 5],
        lambda x: onnx_resize(x, "linear", "pytorch_half_pixel", sizes=[7, 9]), "onnx.reference",
        dtype="f16")
    add("adaptive_avg_pool2d", i, "torch_tensorrt", ifields("adaptive_avg_pool2d", [3, 4]),
        [1, 2, 7, 9], lambda x: np_adaptive_pool(x, [3, 4], np.mean), "numpy")
    add("adaptive_max_pool2d_30x45", i, "torch_tensorrt",
        ifields("adaptive_max_pool2d", [7, 7]), [1, 2, 30, 45],
        lambda x: np_adaptive_pool(x, [7, 7], np.max), "numpy")
    add("adaptive_avg_pool1d", i, "torch_tensorrt", ifields("adaptive_avg_pool1d", [4]),
        [2, 3, 11], lambda x: np_adaptive_pool(x, [4], np.mean), "numpy")
    add("adaptive_max_pool3d", i, "torch_tensorrt", ifields("adaptive_max_pool3d", [2, 3, 2]),
        [1, 2, 5, 7, 3], lambda x: np_adaptive_pool(x, [2, 3, 2], np.max), "numpy")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", choices=["auto", "torch", "onnx"], default="auto")
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args()
    use_torch = args.source == "torch"
    if args.source == "auto":
        try:
            import torch  # noqa: F401
            use_torch = True
        except ImportError:
            use_torch = False
    os.makedirs(args.out, exist_ok=True)
    manifest = {"generator": "scripts/gen_plugin_goldens.py", "cases": []}
    for c in cases():
        x = rng_values(c["shape"], c["seed"], c["lo"], c["hi"])
        stored, exact = as_dtype(x, c["dtype"])
        if use_torch:
            y, source = torch_expected(c, exact), "torch"
        else:
            y, source = c["ref"](exact), c["source"]
        y = np.asarray(y, np.float64).astype(np.float32)
        np.save(os.path.join(args.out, c["name"] + ".in.npy"), stored)
        np.save(os.path.join(args.out, c["name"] + ".out.npy"), y)
        atol, rtol = TOL[c["dtype"]]
        manifest["cases"].append({
            "name": c["name"], "plugin": c["plugin"], "namespace": c["namespace"],
            "version": "1", "fields": c["fields"], "dtype": c["dtype"],
            "input": c["name"] + ".in.npy", "expected": c["name"] + ".out.npy",
            "atol": atol, "rtol": rtol, "source": source,
        })
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, allow_nan=False, default=str)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(args.out, n)) for n in os.listdir(args.out))
    print(f"wrote {len(manifest['cases'])} cases ({total / 1024:.0f} KiB) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
