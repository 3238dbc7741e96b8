#!/usr/bin/env python3
"""Times torchtrt's built-in CPU plugins and its core reduction and normalisation layers
against onnxruntime's equivalent single-node models and against a plain memory copy of the
same bytes, in one run, and prints two tables.

    python bench/cpu_plugins_vs_onnxruntime.py [--iters 50] [--warmup 10] [--threads 2]
        [--skip-build | --exe PATH --layers-exe PATH] [--cli [--torchtrtc PATH]]
        [--only plugins|layers] [--rounds N] [--markdown]

Needs `pip install onnx onnxruntime numpy`. Our side is
`cargo run --release -p torchtrt-plugins --example bench_plugins -- --json` for the plugins
and `cargo run --release -p torchtrt-cpu --example bench_layers -- --json` for the core
layers (kernels run with preallocated outputs on a pool of --threads threads). With --cli
each case's ONNX model (the one onnxruntime runs) also goes through `torchtrtc bench
MODEL.onnx --json` (the path users run: compiled from the model, bound buffers,
RAYON_NUM_THREADS = --threads), in a column of its own. onnxruntime runs each model with
`intra_op_num_threads = --threads` and preallocated, bound outputs. Core-layer cases run
ours and onnxruntime back to back, case by case (--rounds times, reporting the medians of
the rounds: this VM's speed drifts within seconds). The copy is one memcpy of (input + output
bytes) / 2 between preallocated buffers, measured by the example in the same run; a
fraction is copy_ms / ms (1.0 = as fast as copying the bytes).
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIG = [8, 64, 64, 64]


def resize(coord, mode, nearest_mode=None):
    attrs = {"mode": mode, "coordinate_transformation_mode": coord}
    if nearest_mode:
        attrs["nearest_mode"] = nearest_mode
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], **attrs)
    sizes = numpy_helper.from_array(np.array([8, 64, 128, 128], np.int64), "sizes")
    return [node], [sizes], BIG, ""


def single(op, shape=BIG, inits=(), inputs=("x",), note="", **attrs):
    return [helper.make_node(op, list(inputs), ["y"], **attrs)], list(inits), shape, note


def instance_norm():
    c = np.arange(64, dtype=np.float32)
    scale = numpy_helper.from_array(0.5 + c / 64.0, "scale")
    bias = numpy_helper.from_array(c / 32.0 - 1.0, "bias")
    return single("InstanceNormalization", inits=(scale, bias), inputs=("x", "scale", "bias"),
                  epsilon=1e-5)


# Our case name -> the equivalent onnxruntime model (nodes, initializers, input shape, note).
ORT_CASES = {
    "resize_linear_x2": resize("half_pixel", "linear"),
    "resize_linear_align_corners_x2": resize("align_corners", "linear"),
    "resize_nearest_x2": resize("asymmetric", "nearest", "floor"),
    "lp_normalization_p2_axis1": single("LpNormalization", axis=1, p=2),
    "instance_normalization": instance_norm(),
    "gelu_erf": single("Gelu"),
    "gelu_tanh": single("Gelu", approximate="tanh"),
    "global_max_pool": single("GlobalMaxPool"),
    "adaptive_max_pool_64_to_32": single("MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
    "adaptive_max_pool_30x45_to_7x7": single(
        "MaxPool", shape=[8, 64, 30, 45], kernel_shape=[6, 8], strides=[4, 6],
        note="ORT has no adaptive pooling: MaxPool k(6,8) s(4,6), same output, similar windows"),
}


def axes(*a):
    return numpy_helper.from_array(np.array(a, np.int64), "axes")


def reduce(op, *a):
    return single(op, inits=(axes(*a),) if a else (), inputs=("x", "axes") if a else ("x",),
                  keepdims=1)


def layer_norm(axis):
    n = int(np.prod(BIG[axis:]))
    c = np.arange(n, dtype=np.float32).reshape(BIG[axis:])
    scale = numpy_helper.from_array(0.5 + (c % 64) / 64.0, "scale")
    bias = numpy_helper.from_array((c % 32) / 32.0 - 0.5, "bias")
    return single("LayerNormalization", inits=(scale, bias), inputs=("x", "scale", "bias"),
                  axis=axis, epsilon=1e-5)


def attention(seq):
    """ONNX Attention-23 over [1, 12, seq, 64] with an additive [1, 1, seq, seq] mask
    (onnxruntime takes no mask broadcast along the queries)."""
    shape = [1, 12, seq, 64]
    mask = np.where(np.arange(seq) < seq - seq // 8, 0.0, -np.inf).astype(np.float32)
    mask = numpy_helper.from_array(mask.reshape(1, 1, 1, seq).repeat(seq, axis=2), "mask")
    return [helper.make_node("Attention", ["x", "x", "x", "mask"], ["y"])], [mask], shape, \
        "q = k = v = the input; the mask masks the last eighth of the keys"


# The core layers' case names (bench_layers) -> the equivalent one-node model.
LAYER_CASES = {
    "core_global_max_pool": single("GlobalMaxPool"),
    "core_global_average_pool": single("GlobalAveragePool"),
    "reduce_mean_last_axis": reduce("ReduceMean", -1),
    "reduce_mean_axis1": reduce("ReduceMean", 1),
    "reduce_max_last_axis": reduce("ReduceMax", -1),
    "reduce_max_axis1": reduce("ReduceMax", 1),
    "reduce_sum_all": reduce("ReduceSum"),
    "softmax_last_axis": single("Softmax", axis=-1),
    "softmax_axis1": single("Softmax", axis=1),
    "log_softmax_last_axis": single("LogSoftmax", axis=-1),
    "layer_norm_last_axis": layer_norm(3),
    "layer_norm_axis1": layer_norm(1),
    "attention_bert_s128": attention(128),
    "attention_bert_s512": attention(512),
    "max_pool_64_k2_s2": single("MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
    "max_pool_30x45_k6x8_s4x6": single(
        "MaxPool", shape=[8, 64, 30, 45], kernel_shape=[6, 8], strides=[4, 6]),
}


def model_of(nodes, inits, shape):
    graph = helper.make_graph(
        nodes, "bench", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    opset = 23 if nodes[0].op_type == "Attention" else 20
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def ort_ms(nodes, inits, shape, threads, iters, warmup):
    model = model_of(nodes, inits, shape)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).uniform(-3, 3, shape).astype(np.float32)
    y = sess.run(None, {"x": x})[0]
    out = np.empty_like(y)
    binding = sess.io_binding()
    binding.bind_cpu_input("x", x)
    binding.bind_output("y", "cpu", 0, np.float32, list(out.shape), out.ctypes.data)
    for _ in range(warmup):
        sess.run_with_iobinding(binding)
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        sess.run_with_iobinding(binding)
        times.append((time.perf_counter() - t) * 1e3)
    return float(np.median(times))


def ours(args):
    exe = args.exe or os.path.join(ROOT, "target", "release", "examples", "bench_plugins")
    if not args.skip_build and not args.exe:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "torchtrt-plugins",
                        "--example", "bench_plugins"], cwd=ROOT, check=True)
    out = subprocess.run([exe, "--json", "--iters", str(args.iters), "--warmup",
                          str(args.warmup), "--threads", str(args.threads)],
                         cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def layers_exe(args):
    exe = args.layers_exe or os.path.join(ROOT, "target", "release", "examples", "bench_layers")
    if not args.skip_build and not args.layers_exe:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "torchtrt-cpu",
                        "--example", "bench_layers"], cwd=ROOT, check=True)
    return exe


def layer_ms(exe, case, args):
    out = subprocess.run([exe, "--json", "--case", case, "--iters", str(args.iters),
                          "--warmup", str(args.warmup), "--threads", str(args.threads)],
                         cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")][0]


def cli_ms(exe, case, nodes, inits, shape, args):
    """Median ms of `torchtrtc bench` on the case's ONNX model; None when it fails."""
    path = os.path.join(ROOT, "target", "bench-models", f"{case}.onnx")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    onnx.save(model_of(nodes, inits, shape), path)
    env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads))
    out = subprocess.run([exe, "-q", "bench", path, "--json", "--iterations", str(args.iters),
                          "--warmup", str(args.warmup)],
                         cwd=ROOT, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])["median_ms"]


def torchtrtc(args):
    """The torchtrtc binary timed with --cli (built unless given or --skip-build), or None."""
    if not args.cli:
        return None
    if not args.skip_build and not args.torchtrtc:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "torchtrtc"], cwd=ROOT,
                       check=True)
    return args.torchtrtc or os.path.join(ROOT, "target", "release", "torchtrtc")


def layer_rows(args, cli_exe):
    exe = layers_exe(args)
    rows, notes = [], []
    for case, (nodes, inits, shape, note) in LAYER_CASES.items():
        runs, ort_runs = [], []
        for _ in range(args.rounds):
            runs.append(layer_ms(exe, case, args))
            ort_runs.append(ort_ms(nodes, inits, shape, args.threads, args.iters, args.warmup))
        r = dict(runs[0])
        if "skipped" not in r:
            for key in ("ours_ms", "ours_min_ms", "copy_ms"):
                r[key] = float(np.median([run[key] for run in runs]))
        ort_t = float(np.median(ort_runs))
        cli = cli_ms(cli_exe, case, nodes, inits, shape, args) if cli_exe else None
        if note:
            notes.append(f"{case}: {note}")
        if "skipped" in r:
            notes.append(f"{case}: ours skipped ({r['skipped']})")
            rows.append((case, None, None, cli, ort_t, None))
            continue
        rows.append((case, r["ours_ms"], r["ours_min_ms"], cli, ort_t, r["copy_ms"]))
    return rows, notes


def fmt(v, spec):
    return "n/a" if v is None else format(v, spec)


def table(header, lines, markdown):
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
        for line in lines:
            print("| " + " | ".join(line) + " |")
    else:
        print(f"{header[0]:<32}" + "".join(f"{h:>11}" for h in header[1:]))
        for line in lines:
            print(f"{line[0]:<32}" + "".join(f"{v:>11}" for v in line[1:]))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--skip-build", action="store_true")
    p.add_argument("--exe", help="a prebuilt bench_plugins binary (implies --skip-build)")
    p.add_argument("--layers-exe", help="a prebuilt bench_layers binary")
    p.add_argument("--only", choices=["plugins", "layers"])
    p.add_argument("--rounds", type=int, default=1,
                   help="core layers: time ours then onnxruntime this many times per case "
                        "and report the medians of the rounds")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    p.add_argument("--cli", action="store_true",
                   help="also time each ONNX model through `torchtrtc bench`")
    p.add_argument("--torchtrtc", help="a prebuilt torchtrtc (default target/release/torchtrtc)")
    args = p.parse_args()
    cli = torchtrtc(args)

    if args.only != "layers":
        plugin_table(args, cli)
    if args.only != "plugins":
        rows, notes = layer_rows(args, cli)
        header = ("layer case", "ours ms", "ours min", "torchtrtc", "ORT ms", "copy ms",
                  "ORT/ours")
        lines = [(case, fmt(o, ".3f"), fmt(m, ".3f"), fmt(c, ".3f"), fmt(t, ".3f"),
                  fmt(cp, ".3f"), fmt(None if o is None else t / o, ".2f"))
                 for case, o, m, c, t, cp in rows]
        print()
        table(header, lines, args.markdown)
        rounds = f"; the median of {args.rounds} rounds" if args.rounds > 1 else ""
        print(f"\nthreads {args.threads}, median of {args.iters} after {args.warmup} warm-up "
              f"runs{rounds}; onnxruntime {ort.__version__}; ORT/ours > 1 means ours is faster; "
              f"torchtrtc = median through `torchtrtc bench` on the one-node model (--cli).")
        for n in notes:
            print(f"- {n}")
    return 0


def plugin_table(args, cli):
    rows, notes = [], []
    for r in ours(args):
        case = r["case"]
        nodes, inits, shape, note = ORT_CASES[case]
        ort_t = ort_ms(nodes, inits, shape, args.threads, args.iters, args.warmup)
        if note:
            notes.append(f"{case}: {note}")
        cli_t = cli_ms(cli, case, nodes, inits, shape, args) if cli else None
        if "skipped" in r:
            notes.append(f"{case}: ours skipped ({r['skipped']})")
            rows.append((case, None, ort_t, None, None, None, cli_t))
            continue
        copy = r["copy_ms"]
        rows.append((case, r["ours_ms"], ort_t, copy, copy / r["ours_ms"], copy / ort_t, cli_t))

    header = ("case", "ours ms", "ORT ms", "copy ms", "ours/copy", "ORT/copy", "ORT/ours")
    if cli:
        header += ("CLI ms", "ORT/CLI")
    lines = []
    for case, o, t, c, fo, ft, cl in rows:
        speed = None if o is None else t / o
        line = (case, fmt(o, ".3f"), fmt(t, ".3f"), fmt(c, ".3f"), fmt(fo, ".2f"),
                fmt(ft, ".2f"), fmt(speed, ".2f"))
        if cli:
            line += (fmt(cl, ".3f"), fmt(None if cl is None else t / cl, ".2f"))
        lines.append(line)
    table(header, lines, args.markdown)
    print(f"\nthreads {args.threads}, median of {args.iters} after {args.warmup} warm-up runs; "
          f"onnxruntime {ort.__version__}; fractions are copy ms / ms.")
    for n in notes:
        print(f"- {n}")


if __name__ == "__main__":
    sys.exit(main())
