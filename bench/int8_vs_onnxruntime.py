#!/usr/bin/env python3
"""INT8 on the CPU: torchvision ResNet-50 and ResNet-18 (seeded random weights, exported by
PyTorch's TorchScript exporter) in f32, calibrated INT8 (`torchtrtc --precision int8
--calibration`) and as a Q/DQ model made by onnxruntime's own `quantize_static` (per-channel
int8 weights, uint8 activations), through torchtrt and onnxruntime, two threads, median of
N runs, measured in one run. The Q/DQ model is what both engines run in the "qdq" rows;
calibration and evaluation images are distinct `randn` draws. Accuracy: relative L2 error of
the logits and top-1 agreement against PyTorch's f32 on `--eval` images.

    cargo build --release -p torchtrtc
    .venv/bin/python bench/int8_vs_onnxruntime.py [--runs 20] [--eval 16] [--torchtrtc target/release/torchtrtc]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort
import torch
import torchvision
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "scripts"))
from gen_torch_programs import randomize  # noqa: E402

torch.set_grad_enabled(False)
SHAPE = (1, 3, 224, 224)


def images(seed, n):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*SHAPE, generator=g).numpy() for _ in range(n)]


class Batches(CalibrationDataReader):
    def __init__(self, batches):
        self.it = iter(batches)

    def get_next(self):
        b = next(self.it, None)
        return None if b is None else {"x": b}


def ort_session(path, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def time_ort(path, x, runs, threads):
    s = ort_session(path, threads)
    for _ in range(3):
        s.run(None, {"x": x})
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        s.run(None, {"x": x})
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times), s


def ours(exe, args, work, tag):
    """Compiles an engine with `args`, times it and returns (median ms, engine path)."""
    engine = os.path.join(work, f"{tag}.engine")
    subprocess.run([exe, "compile", *args, "-o", engine, "-q"], check=True)
    out = subprocess.run([exe, "bench", engine, "--iterations", str(ARGS.runs), "--json", "-q"],
                         check=True, capture_output=True, text=True,
                         env={**os.environ, "RAYON_NUM_THREADS": str(ARGS.threads)})
    return json.loads(out.stdout.strip().splitlines()[-1])["median_ms"], engine


def run_ours(exe, engine, x_path, work):
    out = os.path.join(work, "out")
    subprocess.run([exe, "run", engine, "--input", f"x={x_path}", "--output-dir", out, "-q"], check=True,
                   capture_output=True)
    return np.load(os.path.join(out, "y.npy"))


def accuracy(outputs, reference):
    err = max(np.linalg.norm(o - r) / np.linalg.norm(r) for o, r in zip(outputs, reference))
    agree = sum(int(o.argmax() == r.argmax()) for o, r in zip(outputs, reference))
    return err, agree


def model_rows(name, work, exe):
    model = randomize(getattr(torchvision.models, name)(num_classes=1000), 1)
    f32 = os.path.join(work, f"{name}.onnx")
    torch.onnx.export(model, (torch.from_numpy(images(0, 1)[0]),), f32, input_names=["x"],
                      output_names=["y"], dynamo=False, opset_version=17)
    calib = images(1, ARGS.calibration)
    cal_dir = os.path.join(work, f"{name}_calibration")
    os.makedirs(cal_dir, exist_ok=True)
    for i, b in enumerate(calib):
        np.save(os.path.join(cal_dir, f"b{i:02}.npy"), b)
    qdq = os.path.join(work, f"{name}_qdq.onnx")
    quantize_static(f32, qdq, Batches(calib), quant_format=QuantFormat.QDQ, per_channel=True,
                    weight_type=QuantType.QInt8, activation_type=QuantType.QUInt8)
    evals = images(2, ARGS.eval)
    eval_paths = []
    for i, e in enumerate(evals):
        p = os.path.join(work, f"eval{i}.npy")
        np.save(p, e)
        eval_paths.append(p)
    reference = [model(torch.from_numpy(e)).numpy() for e in evals]
    x = evals[0]
    rows = []
    for label, path, flags in [
        ("f32", f32, []),
        ("int8 calibrated", f32, ["--precision", "int8", "--calibration", cal_dir]),
        ("int8 calibrated, percentile", f32, ["--precision", "int8", "--calibration", cal_dir,
                                              "--calibration-method", "percentile"]),
        ("qdq (onnxruntime's)", qdq, []),
    ]:
        ms, engine = ours(exe, [path, *flags], work, f"{name}_{len(rows)}")
        out = [run_ours(exe, engine, p, work) for p in eval_paths]
        err, agree = accuracy(out, reference)
        ort_ms = ort_out = None
        if not label.startswith("int8 calibrated"):
            ort_ms, session = time_ort(path, x, ARGS.runs, ARGS.threads)
            ort_out = [session.run(None, {"x": e})[0] for e in evals]
        rows.append((name, label, ms, ort_ms, err, agree, ort_out and accuracy(ort_out, reference)))
    return rows


def main():
    exe = ARGS.torchtrtc
    print(f"| model | engine | torchtrt ms | onnxruntime ms | ort / ours | torchtrt err, top-1 | "
          f"onnxruntime err, top-1 |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        for name in ARGS.models:
            for (m, label, ms, ort_ms, err, agree, ort_acc) in model_rows(name, work, exe):
                ratio = f"{ort_ms / ms:.2f}" if ort_ms else "–"
                ort_cell = f"{ort_ms:.2f}" if ort_ms else "–"
                ort_acc_cell = f"{ort_acc[0]:.4f}, {ort_acc[1]}/{ARGS.eval}" if ort_acc else "–"
                print(f"| {m} | {label} | {ms:.2f} | {ort_cell} | {ratio} | {err:.4f}, "
                      f"{agree}/{ARGS.eval} | {ort_acc_cell} |", flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--torchtrtc", default="target/release/torchtrtc")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--eval", type=int, default=16)
    p.add_argument("--calibration", type=int, default=8)
    p.add_argument("--models", nargs="+", default=["resnet50", "resnet18"])
    ARGS = p.parse_args()
    main()
