#!/usr/bin/env python3
"""Per-call overhead of the Python binding over the Rust execution context (issue 19).

For small models (the overhead dominates) it times, in one process and on the same arrays:

- `engine(x)`: the public call: DLPack in, output arrays allocated by numpy / torch, bound,
  run with the GIL released;
- `run_list([x], [out])`: the same with preallocated outputs;
- the Rust context alone (`time_bound_runs`): bound once, then `execute_bound` (CPU) or
  `enqueue` + `synchronize` (CUDA) in a Rust loop.

Batches of the paths are interleaved (so drifting load hits them alike); the overhead is the
Python path's median (and minimum) single-call time minus the Rust loop's — on a busy
machine the minimum is the steadier figure. CUDA rows (`--device cuda`) synchronize after every call on both sides, and
also report the launch time alone (`launch_us`: calls queued back to back, the call returns
once the work is queued).

    python bench/python_overhead.py [--device cpu|cuda] [--rounds 50] [--batch 100] [--json]

On the CPU both numpy arrays and torch tensors are passed (a row each); on a GPU, CUDA
tensors.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np


def models():
    """name → (onnx.ModelProto, input shape): an Add on 16 floats, and a 2-layer MLP."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    g = np.random.default_rng(0)
    out = {}
    one = numpy_helper.from_array(np.ones(16, np.float32), "one")
    graph = helper.make_graph([helper.make_node("Add", ["x", "one"], ["y"])], "add",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])], [one])
    out["add_1x16"] = (helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), (1, 16))
    w1 = numpy_helper.from_array(g.standard_normal((256, 256)).astype(np.float32) * 0.05, "w1")
    w2 = numpy_helper.from_array(g.standard_normal((256, 64)).astype(np.float32) * 0.05, "w2")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["y"])]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 256])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 64])], [w1, w2])
    out["mlp_8x256"] = (helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), (8, 256))
    for m, _ in out.values():
        onnx.checker.check_model(m)
    return out


def per_call(fn, n, sync=None):
    """Seconds of each of `n` back-to-back calls (each synchronized when `sync` is given)."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        if sync:
            sync()
        times.append(time.perf_counter() - t)
    return times


def bench(name, model, shape, device, rounds, batch, kind):
    """Interleaves batches of the paths (so drifting load hits them alike); per path, the
    median and the minimum of single calls. `kind`: the arrays passed, `numpy` or `torch`."""
    import torchtrt

    engine = torchtrt.compile(model, device=device)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    sync = None
    arg = x
    if kind == "torch":
        import torch

        arg = torch.from_numpy(x)
    if device != "cpu":
        arg = arg.cuda()
        sync = torch.cuda.synchronize
    out = engine(arg)
    native = engine._native
    paths = {
        "call": lambda: per_call(lambda: engine(arg), batch, sync),
        "prealloc": lambda: per_call(lambda: native.run_list([arg], [out]), batch, sync),
        "rust": lambda: native.time_bound_runs([arg], batch),
    }
    if sync:
        paths["launch"] = lambda: per_call(lambda: engine(arg), batch)
    for f in paths.values():
        f()
    samples = {k: [] for k in paths}
    for _ in range(rounds):
        for k, f in paths.items():
            samples[k].extend(f())
            if sync:
                sync()
    row = {"model": name, "device": engine.device, "arrays": kind}
    for k, v in samples.items():
        row[f"{k}_us"] = statistics.median(v) * 1e6
        row[f"{k}_min_us"] = min(v) * 1e6
    row["overhead_us"] = row["call_us"] - row["rust_us"]
    row["overhead_min_us"] = row["call_min_us"] - row["rust_min_us"]
    row["overhead_prealloc_min_us"] = row["prealloc_min_us"] - row["rust_min_us"]
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--rounds", type=int, default=100)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    kinds = ["numpy", "torch"] if a.device == "cpu" else ["torch"]
    rows = [bench(n, m, s, a.device, a.rounds, a.batch, k) for n, (m, s) in models().items() for k in kinds]
    if a.json:
        print(json.dumps(rows))
        return
    cols = ["model", "device", "arrays", "call_us", "rust_us", "overhead_us", "call_min_us", "prealloc_min_us",
            "rust_min_us", "overhead_min_us", "overhead_prealloc_min_us"]
    if a.device != "cpu":
        cols.insert(6, "launch_us")
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(f"{r[c]:.1f}" if isinstance(r[c], float) else str(r[c]) for c in cols) + " |")


if __name__ == "__main__":
    main()
