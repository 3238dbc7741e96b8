#!/usr/bin/env python3
"""Latency of the ONNX `light` networks through torchtrt and onnxruntime, same inputs, two
threads, median of N runs after warm-up, measured in one run; prints a Markdown table with
the ratio per model and the geometric mean.

    cargo build --release -p torchtrtc
    .venv/bin/python bench/models_vs_onnxruntime.py [--runs 10] [--torchtrtc target/release/torchtrtc]
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import time

import numpy as np
import onnx
import onnxruntime as ort

MODELS = ["squeezenet", "shufflenet", "inception_v2", "bvlc_alexnet", "inception_v1",
          "resnet50", "densenet121", "zfnet512", "vgg19"]


def light_dir():
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def dummy_input(model):
    inits = {i.name for i in model.graph.initializer}
    x = [i for i in model.graph.input if i.name not in inits][0]
    shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in x.type.tensor_type.shape.dim)
    n = int(np.prod(shape))
    return x.name, (np.arange(n).reshape(shape) / n).astype(np.float32)


def time_ort(path, name, x, runs, warmup, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    for _ in range(warmup):
        sess.run(None, {name: x})
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        sess.run(None, {name: x})
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def time_ours(exe, path, runs, warmup, threads):
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    out = subprocess.run([exe, "bench", path, "--iterations", str(runs), "--warmup", str(warmup), "--json", "-q"],
                         capture_output=True, text=True, env=env)
    if out.returncode != 0:
        return None, out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed"
    return json.loads(out.stdout.strip().splitlines()[-1])["median_ms"], None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--torchtrtc", default="target/release/torchtrtc")
    args = ap.parse_args()
    rows, ratios = [], []
    for m in MODELS:
        path = os.path.join(light_dir(), f"light_{m}.onnx")
        name, x = dummy_input(onnx.load(path))
        ours, err = time_ours(args.torchtrtc, path, args.runs, args.warmup, args.threads)
        theirs = time_ort(path, name, x, args.runs, args.warmup, args.threads)
        if ours is None:
            rows.append(f"| {m} | failed: {err} | {theirs:.2f} | – |")
            continue
        ratios.append(ours / theirs)
        rows.append(f"| {m} | {ours:.2f} | {theirs:.2f} | {ours / theirs:.2f} |")
    print(f"onnxruntime {ort.__version__}, {args.threads} threads, median of {args.runs} runs")
    print("| model | torchtrt ms | onnxruntime ms | ratio |")
    print("|---|---|---|---|")
    print("\n".join(rows))
    if ratios:
        g = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"| geometric mean ({len(ratios)} models) | | | {g:.2f} |")


if __name__ == "__main__":
    main()
