"""INT8 on the GPU: a network (torchvision ResNet-50 by default; seeded random weights,
calibrated batch norms, as `gpu_networks.py`) at one batch size, compiled by `torchtrtc
--device cuda` in f16 and in INT8 (`--precision int8 --calibration DIR`: integer
convolutions, f16 elsewhere), timed with `torchtrtc bench` next to PyTorch eager f16 (and
`torch.compile` with `--compile`), and compared with the f32 model on held-out batches:
top-1 agreement and relative L2 error of the logits. Calibration and evaluation batches are
distinct `torch.rand` draws. One call on one GPU; a markdown table, then the INT8 engine's
time per layer kind.

    python3 bench/gpu_int8.py --exe .device-bin/torchtrtc [--network resnet50] [--batch 32]
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_networks as nets  # noqa: E402


def tool(*args):
    return nets.run_tool([str(a) for a in args])


def batches(seed, count, batch):
    gen = torch.Generator().manual_seed(seed)
    return [torch.rand(batch, 3, 224, 224, generator=gen) for _ in range(count)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exe", required=True, help="the torchtrtc to run")
    ap.add_argument("--network", default="resnet50")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--calibration", type=int, default=4, help="calibration batches")
    ap.add_argument("--eval", type=int, default=2, help="held-out batches")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--compile", action="store_true", help="time torch.compile f16 too")
    ap.add_argument("--work", default="/tmp/torchtrt_int8")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    model = nets.build(args.network).cuda()
    onnx_path = os.path.join(args.work, f"{args.network}_b{args.batch}.onnx")
    cal_dir = os.path.join(args.work, "calibration")
    os.makedirs(cal_dir, exist_ok=True)
    for i, b in enumerate(batches(21, args.calibration, args.batch)):
        np.save(os.path.join(cal_dir, f"b{i:02}.npy"), b.numpy())
    evals = batches(11, args.eval, args.batch)
    eval_paths = []
    for i, b in enumerate(evals):
        eval_paths.append(os.path.join(args.work, f"eval{i}.npy"))
        np.save(eval_paths[-1], b.numpy())
    with torch.no_grad():
        nets.export(model, evals[0].cuda(), onnx_path)
        ref = np.concatenate([model(b.cuda()).float().cpu().numpy() for b in evals])
        half = model.half()
        x16 = evals[0].cuda().half()
        eager_ms = nets.cuda_median_ms(lambda: half(x16), args.iters, args.warmup)
        compile_ms = None
        if args.compile:
            compiled = torch.compile(half)
            compiled(x16)
            compile_ms = nets.cuda_median_ms(lambda: compiled(x16), args.iters, args.warmup)

    rows = []
    for label, flags in [
        ("f16", ["--precision", "f16"]),
        ("int8", ["--precision", "int8", "--calibration", cal_dir]),
        ("int8 percentile", ["--precision", "int8", "--calibration", cal_dir,
                             "--calibration-method", "percentile"]),
    ]:
        engine = os.path.join(args.work, f"{label.replace(' ', '_')}.engine")
        t = time.time()
        tool(args.exe, "compile", onnx_path, "-o", engine, "--device", "cuda", *flags, "-q")
        build_s = time.time() - t
        stats = json.loads(tool(args.exe, "bench", engine, "--device", "cuda", "--iterations", args.iters,
                                "--warmup", args.warmup, "--json", "-q").strip().splitlines()[-1])
        outs = []
        for i, p in enumerate(eval_paths):
            out_dir = os.path.join(args.work, f"out_{label.replace(' ', '_')}_{i}")
            tool(args.exe, "run", engine, "--device", "cuda", "--input", f"x={p}", "--output-dir", out_dir, "-q")
            outs.append(np.load(os.path.join(out_dir, "logits.npy")))
        ours = np.concatenate(outs)
        agree = int(np.sum(ours.argmax(-1) == ref.argmax(-1)))
        integer = tool(args.exe, "inspect", engine).count("QuantizedConvolution")
        rows.append((label, stats["median_ms"], agree, len(ref), nets.relative_error(ours, ref), build_s, integer))

    print(f"\n{args.network} batch {args.batch}, {torch.cuda.get_device_name()}: PyTorch eager f16 "
          f"{eager_ms:.3f} ms" + (f", torch.compile f16 {compile_ms:.3f} ms" if compile_ms else ""))
    print("| engine | ms | eager f16 / ours | top-1 vs f32 | rel. error vs f32 | build s | integer conv lines in inspect |")
    print("|---|---|---|---|---|---|---|")
    for label, ms, agree, n, err, build_s, integer in rows:
        print(f"| {label} | {ms:.3f} | {eager_ms / ms:.2f} | {agree}/{n} | {err:.4f} | {build_s:.1f} | {integer} |")
    print("\nINT8 engine, time per layer kind:")
    profile = tool(args.exe, "bench", os.path.join(args.work, "int8.engine"), "--device", "cuda",
                   "--iterations", 20, "--profile", "-q")
    print(profile[-3000:])


if __name__ == "__main__":
    main()
