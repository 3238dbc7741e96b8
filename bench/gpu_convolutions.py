"""Dense convolutions on the GPU: torchtrt engines against cuDNN through PyTorch, f16.

For each layer (resnet50's and convnext_tiny's ungrouped convolutions at batch 32): a one-node
ONNX model (bias, seeded random weights, f16 throughout, so the engine holds the convolution
alone) is compiled with `torchtrtc compile --device cuda` and timed with
`torchtrtc bench --device cuda` for each executable given (e.g. a new and an old build),
against `torch.nn.functional.conv2d` in f16 on NCHW and channels-last inputs (cuDNN,
`cudnn.benchmark` on). TFLOP/s counts 2·N·M·C·KH·KW·OH·OW over the median.

    python3 bench/gpu_convolutions.py --exe NEW [--exe OLD]
"""

import argparse
import json
import os

import numpy as np
import torch
import torch.nn.functional as F

import gpu_networks as nets
from gpu_depthwise import ours_cells, time_exes

# (batch, in channels, out channels, size, kernel, stride)
SHAPES = [
    (32, 64, 64, 56, 1, 1), (32, 64, 64, 56, 3, 1), (32, 64, 256, 56, 1, 1),
    (32, 256, 64, 56, 1, 1), (32, 128, 128, 56, 3, 2), (32, 128, 128, 28, 3, 1),
    (32, 512, 128, 28, 1, 1), (32, 256, 256, 14, 3, 1), (32, 1024, 256, 14, 1, 1),
    (32, 256, 1024, 14, 1, 1), (32, 512, 512, 7, 3, 1), (32, 512, 2048, 7, 1, 1),
    (32, 2048, 512, 7, 1, 1), (32, 3, 64, 224, 7, 2), (32, 96, 192, 56, 2, 2),
    (32, 384, 768, 14, 2, 2), (1, 64, 64, 56, 3, 1), (1, 256, 256, 14, 3, 1),
]


def onnx_model(path, n, c, m, size, k, stride):
    """A one-node Conv model in f16 (input, output and weights); returns its f32 weights and
    bias."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(k * 1000 + c + m)
    w = (rng.standard_normal((m, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    pad = (k - 1) // 2 if k % 2 else 0
    out = (size + 2 * pad - k) // stride + 1
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[k, k],
                            pads=[pad] * 4, strides=[stride, stride])
    graph = helper.make_graph(
        [node], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [n, c, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [n, m, out, out])],
        [numpy_helper.from_array(w.astype(np.float16), "w"),
         numpy_helper.from_array(b.astype(np.float16), "b")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return w, b, pad, out


def layer_rows(exes, iters, work):
    torch.backends.cudnn.benchmark = True
    rows = []
    for n, c, m, size, k, stride in SHAPES:
        name = f"conv{k}x{k}_s{stride}_{n}x{c}x{size}x{size}_to{m}"
        model = os.path.join(work, name + ".onnx")
        w, b, pad, out = onnx_model(model, n, c, m, size, k, stride)
        x = torch.randn(n, c, size, size, device="cuda", dtype=torch.half)
        wt = torch.from_numpy(w).cuda().half()
        bt = torch.from_numpy(b).cuda().half()
        xc = x.to(memory_format=torch.channels_last)
        wc = wt.to(memory_format=torch.channels_last)
        flop = 2 * n * m * c * k * k * out * out
        row = {
            "layer": name,
            "gflop": flop / 1e9,
            "cudnn_nchw_ms": nets.cuda_median_ms(lambda: F.conv2d(x, wt, bt, stride, pad), iters, 20),
            "cudnn_nhwc_ms": nets.cuda_median_ms(lambda: F.conv2d(xc, wc, bt, stride, pad), iters, 20),
        }
        time_exes(row, exes, model, os.path.join(work, name), iters)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exe", action="append", required=True, help="torchtrtc to time (repeatable)")
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--work", default="/tmp/torchtrt_convolutions")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rows = layer_rows(args.exe, args.iterations, args.work)
    print("| layer | GFLOP | " + " | ".join(f"torchtrtc {i} ms" for i in range(len(args.exe)))
          + " | cuDNN NCHW ms | cuDNN NHWC ms | TFLOP/s (0) | cuDNN NHWC / ours (0) |")
    for r in rows:
        o = r.get("ours0_ms")
        tail = f"{r['gflop'] / o:.0f} | {r['cudnn_nhwc_ms'] / o:.2f}" if o else " | "
        print(f"| {r['layer']} | {r['gflop']:.2f} | {ours_cells(r, len(args.exe))} | "
              f"{r['cudnn_nchw_ms']:.4f} | {r['cudnn_nhwc_ms']:.4f} | {tail} |")


if __name__ == "__main__":
    main()
