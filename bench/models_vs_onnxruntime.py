#!/usr/bin/env python3
"""Latency of the ONNX `light` networks through torchtrt and onnxruntime, same inputs, two
threads, median of N runs after warm-up, measured in one run; prints a Markdown table with
the ratio per model and the geometric mean. `--bert` adds HF BERT-base (random weights, seed
0) at batch 1 and `--seq` tokens with an attention mask that pads the last eighth, exported
with the TorchScript exporter where torch and transformers are installed; its outputs are
compared with onnxruntime's too. `--suite DIR` adds the real-model suite exported by
`scripts/gen_model_suite.py DIR [--full]` (each model's first case; `--only-suite` for those
rows alone), with each output's largest difference to onnxruntime's relative to its largest
magnitude.

    cargo build --release -p torchtrtc
    .venv/bin/python bench/models_vs_onnxruntime.py [--runs 10] [--torchtrtc target/release/torchtrtc] [--bert]
    .venv/bin/python scripts/gen_model_suite.py target/model-suite-full --full
    .venv/bin/python bench/models_vs_onnxruntime.py --only-suite --suite target/model-suite-full
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


def bert(work, seq):
    """BERT-base ONNX model and its inputs: `input_ids` [1, seq] and `attention_mask` with the
    last eighth of the tokens padded."""
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(attn_implementation="eager")
    model = transformers.BertModel(config).eval()
    ids = torch.randint(0, config.vocab_size, (1, seq), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(1, seq, dtype=torch.int64)
    mask[:, seq - seq // 8:] = 0
    path = os.path.join(work, f"bert_base_s{seq}.onnx")

    class Keywords(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
            return out.last_hidden_state, out.pooler_output

    with torch.no_grad():
        torch.onnx.export(Keywords(), (ids, mask), path, input_names=["input_ids", "attention_mask"],
                          output_names=["last_hidden_state", "pooler_output"], opset_version=17,
                          dynamo=False)
    return path, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}


def time_ort_feeds(path, feeds, runs, warmup, threads):
    """Median ms of onnxruntime on `feeds`, and its outputs."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    for _ in range(warmup):
        outs = sess.run(None, feeds)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        outs = sess.run(None, feeds)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times), outs


def bert_row(args, work):
    """The BERT-base row: latencies, and our first output's relative error to onnxruntime's."""
    path, feeds = bert(work, args.seq)
    flags = []
    for name, value in feeds.items():
        np.save(os.path.join(work, f"{name}.npy"), value)
        flags += ["--input", f"{name}={os.path.join(work, name + '.npy')}"]
    theirs, outs = time_ort_feeds(path, feeds, args.runs, args.warmup, args.threads)
    ours, err = time_ours(args.torchtrtc, path, args.runs, args.warmup, args.threads, flags)
    if ours is None:
        return f"| bert_base_s{args.seq} | failed: {err} | {theirs:.2f} | – |", None
    out_dir = os.path.join(work, "bert_out")
    subprocess.run([args.torchtrtc, "run", path, *flags, "--output-dir", out_dir, "-q"], check=True,
                   env=dict(os.environ, RAYON_NUM_THREADS=str(args.threads)))
    got = np.load(os.path.join(out_dir, "last_hidden_state.npy")).astype(np.float64)
    want = outs[0].astype(np.float64)
    rel = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    return (f"| bert_base_s{args.seq} (rel. error {rel:.1e}) | {ours:.2f} | {theirs:.2f} | "
            f"{ours / theirs:.2f} |"), ours / theirs


def suite_rows(args):
    """One row per model of the suite at `args.suite`: latencies on its first case and the
    worst output's difference to onnxruntime's, relative to that output's largest magnitude."""
    with open(os.path.join(args.suite, "manifest.json")) as f:
        manifest = json.load(f)
    rows = []
    for m in manifest["models"]:
        d = os.path.join(args.suite, m["name"])
        case = os.path.join(d, m["cases"][0], "inputs")
        feeds = {i: np.load(os.path.join(case, f"{i}.npy")) for i in m["inputs"]}
        flags = [f for i in m["inputs"] for f in ("--input", f"{i}={os.path.join(case, i + '.npy')}")]
        path = os.path.join(d, "model.onnx")
        theirs, outs = time_ort_feeds(path, feeds, args.runs, args.warmup, args.threads)
        ours, err = time_ours(args.torchtrtc, path, args.runs, args.warmup, args.threads, flags)
        if ours is None:
            rows.append((f"| {m['name']} | failed: {err} | {theirs:.2f} | – |", None))
            continue
        out_dir = os.path.join(args.work, "suite_out", m["name"])
        subprocess.run([args.torchtrtc, "run", path, *flags, "--output-dir", out_dir, "-q"], check=True,
                       capture_output=True, env=dict(os.environ, RAYON_NUM_THREADS=str(args.threads)))
        worst = 0.0
        for o, want in zip(m["outputs"], outs):
            got = np.load(os.path.join(out_dir, f"{o['name']}.npy")).astype(np.float64)
            want = want.astype(np.float64)
            worst = max(worst, float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30)))
        rows.append((f"| {m['name']} (rel. difference {worst:.1e}) | {ours:.2f} | {theirs:.2f} | "
                     f"{ours / theirs:.2f} |", ours / theirs))
    return rows


def time_ort(path, name, x, runs, warmup, threads):
    """Median ms of onnxruntime on the one input `name` = `x`."""
    return time_ort_feeds(path, {name: x}, runs, warmup, threads)[0]


def time_ours(exe, path, runs, warmup, threads, extra=(), env=None):
    env = dict(os.environ, **(env or {}), RAYON_NUM_THREADS=str(threads))
    out = subprocess.run([exe, "bench", path, "--iterations", str(runs), "--warmup", str(warmup), "--json", "-q",
                          *extra],
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
    ap.add_argument("--bert", action="store_true", help="add the BERT-base row")
    ap.add_argument("--only-bert", action="store_true", help="the BERT-base row alone")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--work", default="target/bench-models")
    ap.add_argument("--suite", help="a directory written by scripts/gen_model_suite.py")
    ap.add_argument("--only-suite", action="store_true", help="the suite's rows alone")
    args = ap.parse_args()
    rows, ratios = [], []
    os.makedirs(args.work, exist_ok=True)
    for m in [] if args.only_bert or args.only_suite else MODELS:
        path = os.path.join(light_dir(), f"light_{m}.onnx")
        name, x = dummy_input(onnx.load(path))
        ours, err = time_ours(args.torchtrtc, path, args.runs, args.warmup, args.threads)
        theirs = time_ort(path, name, x, args.runs, args.warmup, args.threads)
        if ours is None:
            rows.append(f"| {m} | failed: {err} | {theirs:.2f} | – |")
            continue
        ratios.append(ours / theirs)
        rows.append(f"| {m} | {ours:.2f} | {theirs:.2f} | {ours / theirs:.2f} |")
    if args.bert or args.only_bert:
        row, ratio = bert_row(args, args.work)
        rows.append(row)
        if ratio is not None:
            ratios.append(ratio)
    if args.suite:
        for row, ratio in suite_rows(args):
            rows.append(row)
            if ratio is not None:
                ratios.append(ratio)
    print(f"onnxruntime {ort.__version__}, {args.threads} threads, median of {args.runs} runs")
    print("| model | torchtrt ms | onnxruntime ms | ratio |")
    print("|---|---|---|---|")
    print("\n".join(rows))
    if ratios:
        g = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"| geometric mean ({len(ratios)} models) | | | {g:.2f} |")


if __name__ == "__main__":
    main()
