"""Depthwise convolutions on the GPU: torchtrt engines against cuDNN through PyTorch, f16.

For each shape (the 7×7 depthwise layers of convnext_tiny at batch 32, and 3×3 and 5×5 ones of
mobilenet and efficientnet): a one-layer ONNX model (groups = channels, bias, seeded random
weights, f16 throughout: compiled as it is, so the engine holds the convolution alone) is
compiled with `torchtrtc compile --device cuda` and timed with
`torchtrtc bench --device cuda` (the path users run; each torchtrtc given is timed, e.g. an
old and a new build), against `torch.nn.functional.conv2d` in f16 on NCHW and channels-last
inputs (cuDNN, `cudnn.benchmark` on), and against a device copy of the same bytes (input
read once, output written once): "of copy" is the copy's time over ours.

    python3 bench/gpu_depthwise.py --exe NEW [--exe OLD] [--networks convnext_tiny]

`--networks` adds end-to-end rows (batch 32, f16) through `gpu_networks.one` for the first
executable and `torchtrtc bench` alone for the others.
"""

import argparse
import json
import os

import numpy as np
import torch
import torch.nn.functional as F

import gpu_networks as nets

# (batch, channels, size, kernel, stride)
SHAPES = [
    (32, 96, 56, 7, 1), (32, 192, 28, 7, 1), (32, 384, 14, 7, 1), (32, 768, 7, 7, 1),
    (32, 32, 112, 3, 1), (32, 96, 112, 3, 2), (32, 144, 56, 3, 1), (32, 240, 28, 5, 1),
    (32, 72, 56, 5, 2), (32, 672, 14, 5, 1), (1, 96, 56, 7, 1), (1, 32, 112, 3, 1),
]


def onnx_model(path, n, c, size, k, stride, channels_last=False):
    """A one-node depthwise Conv model in f16 (input, output and weights), so that the engine
    holds the convolution alone; returns its f32 weights and bias. `channels_last`: the input
    and output are NHWC, transposed around the Conv (the builder's layout pass takes both
    transposes away, leaving the channels-last kernel alone)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(k * 1000 + c)
    w = (rng.standard_normal((c, 1, k, k)) / k).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    out = (size + 2 * (k // 2) - k) // stride + 1
    conv = helper.make_node("Conv", ["xc", "w", "b"], ["yc"], group=c, kernel_shape=[k, k],
                            pads=[k // 2] * 4, strides=[stride, stride])
    if channels_last:
        nodes = [helper.make_node("Transpose", ["x"], ["xc"], perm=[0, 3, 1, 2]), conv,
                 helper.make_node("Transpose", ["yc"], ["y"], perm=[0, 2, 3, 1])]
        shapes = [n, size, size, c], [n, out, out, c]
    else:
        nodes = [helper.make_node("Identity", ["x"], ["xc"]), conv,
                 helper.make_node("Identity", ["yc"], ["y"])]
        shapes = [n, c, size, size], [n, c, out, out]
    graph = helper.make_graph(
        nodes, "depthwise",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, shapes[0])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, shapes[1])],
        [numpy_helper.from_array(w.astype(np.float16), "w"),
         numpy_helper.from_array(b.astype(np.float16), "b")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return w, b


def ours_ms(exe, model, engine, iters, *flags):
    """Median ms of `torchtrtc bench` on `model` compiled for CUDA (with `flags`) into `engine`."""
    nets.run_tool([exe, "compile", model, "-o", engine, "--device", "cuda", *flags, "-q"])
    out = nets.run_tool([exe, "bench", engine, "--device", "cuda", "--iterations", str(iters),
                         "--warmup", "20", "--json", "-q"])
    return json.loads(out.strip().splitlines()[-1])["median_ms"]


def time_exes(row, exes, model, stem, iters, key="ours"):
    """`{key}{i}_ms` (or `{key}{i}_error`) in `row` for each executable, engines at `stem_{i}`."""
    for i, exe in enumerate(exes):
        try:
            row[f"{key}{i}_ms"] = ours_ms(exe, model, f"{stem}_{i}.engine", iters)
        except Exception as e:  # noqa: BLE001 - report and go on
            row[f"{key}{i}_error"] = str(e)[-200:]


def ours_cells(row, count, key="ours"):
    """The table cells of the executables' times (or their errors)."""
    return " | ".join(f"{row[f'{key}{i}_ms']:.4f}" if f"{key}{i}_ms" in row
                      else row.get(f"{key}{i}_error", "") for i in range(count))


def layer_rows(exes, iters, work, shapes=SHAPES):
    torch.backends.cudnn.benchmark = True
    rows = []
    for n, c, size, k, stride in shapes:
        name = f"dw{k}x{k}_s{stride}_{n}x{c}x{size}x{size}"
        model = os.path.join(work, name + ".onnx")
        w, b = onnx_model(model, n, c, size, k, stride)
        x = torch.randn(n, c, size, size, device="cuda", dtype=torch.half)
        wt = torch.from_numpy(w).cuda().half()
        bt = torch.from_numpy(b).cuda().half()
        y = F.conv2d(x, wt, bt, stride, k // 2, 1, c)
        xc = x.to(memory_format=torch.channels_last)
        buf = torch.empty(x.numel() + y.numel(), device="cuda", dtype=torch.half)
        src = torch.empty_like(buf)
        row = {
            "layer": name,
            "cudnn_nchw_ms": nets.cuda_median_ms(lambda: F.conv2d(x, wt, bt, stride, k // 2, 1, c), iters, 20),
            "cudnn_nhwc_ms": nets.cuda_median_ms(lambda: F.conv2d(xc, wt, bt, stride, k // 2, 1, c), iters, 20),
            "copy_ms": nets.cuda_median_ms(lambda: buf.copy_(src), iters, 20),
        }
        time_exes(row, exes, model, os.path.join(work, name), iters)
        nhwc = os.path.join(work, name + "_nhwc.onnx")
        onnx_model(nhwc, n, c, size, k, stride, channels_last=True)
        time_exes(row, exes, nhwc, os.path.join(work, name + "_nhwc"), iters, key="nhwc")
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def network_rows(exes, networks, iters, work):
    rows = []
    for name in networks:
        try:
            row = nets.one(exes[0], name, 32, iters, 20, work)
            engine = os.path.join(work, f"{name}_b32.engine")
            for i, exe in enumerate(exes[1:], 1):
                row[f"ours{i}_ms"] = ours_ms(exe, os.path.join(work, f"{name}_b32.onnx"), engine,
                                             iters, "--precision", "f16")
        except Exception as e:  # noqa: BLE001 - report and go on
            row = {"network": name, "error": str(e)[-300:]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exe", action="append", required=True, help="torchtrtc to time (repeatable)")
    ap.add_argument("--networks", nargs="*", default=[])
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--work", default="/tmp/torchtrt_depthwise")
    ap.add_argument("--first", type=int, default=len(SHAPES), help="time only the first N shapes")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rows = layer_rows(args.exe, args.iterations, args.work, SHAPES[:args.first])
    count = len(args.exe)
    print("| layer | " + " | ".join(f"torchtrtc {i} NCHW ms" for i in range(count)) + " | "
          + " | ".join(f"torchtrtc {i} NHWC ms" for i in range(count))
          + " | cuDNN NCHW ms | cuDNN NHWC ms | copy ms | of copy (0 NCHW, NHWC) |"
          " cuDNN NHWC / ours (0 NHWC) |")
    for r in rows:
        o, h = r.get("ours0_ms"), r.get("nhwc0_ms")
        of = " / ".join(f"{r['copy_ms'] / v:.2f}" for v in (o, h) if v)
        vs = f"{r['cudnn_nhwc_ms'] / h:.2f}" if h else ""
        print(f"| {r['layer']} | {ours_cells(r, count)} | {ours_cells(r, count, 'nhwc')} | "
              f"{r['cudnn_nchw_ms']:.4f} | {r['cudnn_nhwc_ms']:.4f} | {r['copy_ms']:.4f} | "
              f"{of} | {vs} |")
    if args.networks:
        for r in network_rows(args.exe, args.networks, args.iterations, args.work):
            print(json.dumps(r))


if __name__ == "__main__":
    main()
