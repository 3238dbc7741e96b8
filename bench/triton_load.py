#!/usr/bin/env python3
"""Serving load through Triton and the torchtrt backend, against `torchtrtc bench` on the
same engine: the cost of serving.

    .venv/bin/python bench/triton_load.py [--kind cpu|gpu] [--profile release] [--seconds 5]
        [--prebuilt DIR]

Serves the dynamic-batch CNN of scripts/gen_triton_models.py twice — `cnn` with dynamic
batching and `cnn_plain` without, one instance each, `max_batch_size` 8 — and drives each
with closed-loop HTTP clients (one thread and one connection per client, a batch-1 request
at a time) at concurrency 1, 8 and 32, for `--seconds` per point. Reports requests per
second and p50 / p99 latency as the client sees it, then `torchtrtc bench` on the engine the
backend compiled (batch 1 and batch 8). Prints a Markdown table; `--json` also writes the
raw figures.

The client runs on the same machine as the server, so on a small CPU machine the two
compete for cores: the figures are the whole system's.
"""

import argparse
import glob
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import test_triton  # noqa: E402

CONCURRENCY = [1, 8, 32]


def drive(url, model, seconds, clients):
    """Closed-loop load: `clients` threads sending batch-1 requests for `seconds`."""
    import tritonclient.http as httpclient

    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    latencies = [[] for _ in range(clients)]
    errors = []
    start = threading.Barrier(clients + 1)
    stop_at = [0.0]

    def worker(k):
        client = httpclient.InferenceServerClient(url, network_timeout=60)
        inp = httpclient.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        client.infer(model, [inp])
        start.wait()
        while time.perf_counter() < stop_at[0]:
            t0 = time.perf_counter()
            try:
                client.infer(model, [inp])
            except Exception as e:  # noqa: BLE001 - counted and reported
                errors.append(str(e))
                continue
            latencies[k].append(time.perf_counter() - t0)
        client.close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    stop_at[0] = time.perf_counter() + seconds + 0.05
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    all_lat = np.array([v for per in latencies for v in per]) * 1e3
    if errors:
        raise RuntimeError(f"{len(errors)} failed requests, first: {errors[0]}")
    return {
        "requests": int(all_lat.size),
        "throughput_per_s": all_lat.size / wall,
        "p50_ms": float(np.percentile(all_lat, 50)),
        "p99_ms": float(np.percentile(all_lat, 99)),
    }


def torchtrtc_bench(torchtrtc, engine, batch, device):
    out = subprocess.run(
        [torchtrtc, "bench", engine, "--input-shape", f"x={batch}x3x8x8", "--iterations", "2000",
         "--warmup", "100", "--json", "--device", device],
        check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", choices=["cpu", "gpu"], default="cpu")
    ap.add_argument("--profile", choices=["test", "dev", "release"], default="release")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--json", help="write the raw figures here")
    ap.add_argument("--prebuilt", metavar="DIR",
                    help="take the backend and torchtrtc from DIR instead of building them")
    args = ap.parse_args()
    built = test_triton.prebuilt(args.prebuilt) if args.prebuilt else test_triton.build(args.profile)
    kind = "KIND_GPU" if args.kind == "gpu" else "KIND_CPU"
    device = "cuda" if args.kind == "gpu" else "cpu"
    tmp = tempfile.mkdtemp(prefix="torchtrt-triton-bench-")
    models = os.path.join(tmp, "models")
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts/gen_triton_models.py"), models],
                   check=True)
    repo = os.path.join(tmp, "repo")
    backends = os.path.join(tmp, "backends")
    os.makedirs(os.path.join(backends, "torchtrt"))
    shutil.copy(built["backend"], os.path.join(backends, "torchtrt", "libtriton_torchtrt.so"))
    for name, batching in [("cnn", True), ("cnn_plain", False)]:
        os.makedirs(os.path.join(repo, name, "1"))
        with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
            f.write(test_triton.config(name, max_batch=8, batching=batching, kind=kind))
        shutil.copy(os.path.join(models, "cnn.onnx"), os.path.join(repo, name, "1", "model.onnx"))
    server = test_triton.Server(repo, backends, os.path.join(tmp, "tritonserver.log"))
    results = {"machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "kind": kind,
               "profile": args.profile, "seconds": args.seconds, "serving": {}, "torchtrtc": {}}
    try:
        server.wait_ready()
        url = f"127.0.0.1:{server.http}"
        for model in ["cnn", "cnn_plain"]:
            for c in CONCURRENCY:
                r = drive(url, model, args.seconds, c)
                results["serving"][f"{model}@{c}"] = r
                print(f"{model:10s} c={c:2d}: {r['throughput_per_s']:8.0f} req/s  "
                      f"p50 {r['p50_ms']:.2f} ms  p99 {r['p99_ms']:.2f} ms", flush=True)
        engine = sorted(glob.glob(os.path.join(repo, "cnn", "1", "model.*.engine")))[0]
        for batch in [1, 8]:
            b = torchtrtc_bench(built["torchtrtc"], engine, batch, device)
            results["torchtrtc"][f"batch{batch}"] = b
            print(f"torchtrtc bench batch {batch}: median {b['median_ms']:.3f} ms, "
                  f"p99 {b['p99_ms']:.3f} ms, {b['throughput_per_s']:.0f} runs/s", flush=True)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print("| path | concurrency | throughput (req/s) | p50 (ms) | p99 (ms) |")
    print("|---|---:|---:|---:|---:|")
    for model, label in [("cnn", "Triton, dynamic batching"), ("cnn_plain", "Triton, no batching")]:
        for c in CONCURRENCY:
            r = results["serving"][f"{model}@{c}"]
            print(f"| {label} | {c} | {r['throughput_per_s']:.0f} | {r['p50_ms']:.2f} | "
                  f"{r['p99_ms']:.2f} |")
    for batch in [1, 8]:
        b = results["torchtrtc"][f"batch{batch}"]
        print(f"| torchtrtc bench, batch {batch} (rows/s) | 1 | "
              f"{b['throughput_per_s'] * batch:.0f} | {b['median_ms']:.3f} | {b['p99_ms']:.3f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
