#!/usr/bin/env python3
"""Page faults and CPU time of `torchtrtc bench` on a one-node ONNX model: the cost of a
run that allocates (and zero-fills) its output every time shows up as minor page faults
and system time; bound I/O keeps both near zero after warm-up.

    python bench/bench_faults.py --torchtrtc target/release/torchtrtc [--iters 75]

The model is `Resize` ×2 (linear, half_pixel) of f32[8,64,64,64] (a 33 MB output), the case
of the one-context issue. Prints one JSON line: median ms, minor faults, user and system
seconds of the whole process (build included), and the same for a one-iteration run, so the
difference is what the extra iterations cost.
"""

import argparse
import json
import os
import resource
import subprocess
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model(path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64, 64, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 64, 128, 128])
    sizes = numpy_helper.from_array(np.array([8, 64, 128, 128], dtype=np.int64), "sizes")
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear")
    graph = helper.make_graph([node], "resize", [x], [y], [sizes])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)


def run(exe, path, iters, threads):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    out = subprocess.run([exe, "-q", "bench", path, "--json", "--iterations", str(iters),
                          "--warmup", "5"], capture_output=True, text=True, env=env,
                         check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "iterations": iters,
        "median_ms": json.loads(out.stdout.strip().splitlines()[-1])["median_ms"],
        "minor_faults": after.ru_minflt - before.ru_minflt,
        "user_s": round(after.ru_utime - before.ru_utime, 3),
        "system_s": round(after.ru_stime - before.ru_stime, 3),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--torchtrtc", required=True)
    p.add_argument("--iters", type=int, default=75)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "resize.onnx")
        model(path)
        one = run(a.torchtrtc, path, 1, a.threads)
        many = run(a.torchtrtc, path, a.iters, a.threads)
    print(json.dumps({"one": one, "many": many,
                      "faults_per_extra_run": round((many["minor_faults"] - one["minor_faults"])
                                                    / max(1, a.iters - 1), 1)}))


if __name__ == "__main__":
    main()
