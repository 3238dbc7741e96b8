#!/usr/bin/env python3
"""Per-call overhead of the Python binding over the Rust execution context (issue 19).

For small models (the overhead dominates) it times, in one process and on the same arrays:

- `engine(x)`: the public call: DLPack in, output arrays allocated by numpy / torch, bound,
  run with the GIL released;
- `run_list([x], [out])`: the same with preallocated outputs;
- the Rust context alone (`time_bound_runs`): bound once, then `execute_bound` (CPU) or
  `enqueue` + `synchronize` (CUDA) in a Rust loop.

The overhead is the median of the Python path minus the median of the Rust loop. CUDA rows
(`--device cuda`) synchronize after every call on both sides, and also report the launch
time alone (the call returns once the work is queued).

    python bench/python_overhead.py [--device cpu|cuda] [--iters 2000] [--json]
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


def timed(fn, iters, warmup, sync=None):
    for _ in range(warmup):
        fn()
    if sync:
        sync()
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        if sync:
            sync()
        times.append(time.perf_counter() - t)
    return times


def us(times):
    return statistics.median(times) * 1e6


def bench(name, model, shape, device, iters, warmup):
    import torchtrt

    engine = torchtrt.compile(model, device=device)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    sync = None
    if device == "cpu":
        arg = x
        out = engine(arg)
    else:
        import torch

        arg = torch.from_numpy(x).cuda()
        out = engine(arg)
        sync = torch.cuda.synchronize
    native = engine._native
    row = {"model": name, "device": engine.device}
    row["call_us"] = us(timed(lambda: engine(arg), iters, warmup, sync))
    row["prealloc_us"] = us(timed(lambda: native.run_list([arg], [out]), iters, warmup, sync))
    row["rust_us"] = us(native.time_bound_runs([arg], iters)[warmup:] or [0.0])
    if sync:
        row["launch_us"] = us(timed(lambda: engine(arg), iters, warmup))
        sync()
    row["overhead_us"] = row["call_us"] - row["rust_us"]
    row["overhead_prealloc_us"] = row["prealloc_us"] - row["rust_us"]
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    rows = [bench(n, m, s, a.device, a.iters, a.warmup) for n, (m, s) in models().items()]
    if a.json:
        print(json.dumps(rows))
        return
    cols = ["model", "device", "call_us", "prealloc_us", "rust_us", "overhead_us", "overhead_prealloc_us"]
    if a.device != "cpu":
        cols.append("launch_us")
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(f"{r[c]:.1f}" if isinstance(r[c], float) else str(r[c]) for c in cols) + " |")


if __name__ == "__main__":
    main()
