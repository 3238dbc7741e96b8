#!/usr/bin/env python3
"""End-to-end test of the Triton backend (`libtriton_torchtrt.so`) in a real `tritonserver`.

    .venv/bin/python scripts/test_triton.py [--kind cpu|gpu] [--keep] [--prebuilt DIR]

Builds the backend, `torchtrtc` and the example plugin library, lays out a model repository
in a temporary folder, starts the `tritonserver` of `nvidia-pytriton` on 127.0.0.1 with
`--backend-directory`, and checks, within bounded counts and time:

- the repository: `demo` (the demo model with every seed plugin, compiled by `torchtrtc` to
  `model.engine`), `cnn` (a dynamic-batch CNN, `model.onnx` compiled at load, two instances,
  dynamic batching, configuration completed by the backend), `cnn_plain` (the same without
  dynamic batching) and `swish` (a model needing the example plugin library, loaded through
  the `plugins` parameter) and `nms` (NonMaxSuppression: an output whose length the run
  decides, answered with the length of each request's selection);
- single, concurrent, batched (several requests run as one batch: the model statistics show
  fewer executions than inferences) and bad requests (wrong shape, dtype, name; a shape
  outside the engine's profile, answered by the backend), each bad one followed by a good
  one that succeeds; over HTTP and gRPC;
- every output against `torchtrtc run` on the same model and inputs (and the plugin model
  against numpy as well).

`--kind gpu` puts the instances on GPU 0 (`KIND_GPU`); the outputs are then compared with
`torchtrtc run --device cuda` at the tolerance of the GPU kernels.
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import gen_triton_models  # noqa: E402

READY_TIMEOUT_S = 240
REQUEST_TIMEOUT_S = 60
SEED = 7


def log(msg):
    print(f"[test_triton] {msg}", flush=True)


def target_dir():
    return os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))


def build(profile):
    """Builds the backend, `torchtrtc` and the example plugin with a cargo profile: `test`
    (the default here: `scripts/test` has built everything with it already), `dev` or
    `release`."""
    cmd = ["cargo", "build", "--locked", "--profile", profile, "-p", "torchtrt-triton",
           "-p", "torchtrtc", "-p", "torchtrt-example-plugin-rust"]
    log(" ".join(cmd))
    subprocess.run(cmd, cwd=ROOT, check=True)
    out = os.path.join(target_dir(), "release" if profile == "release" else "debug")
    return {
        "backend": os.path.join(out, "libtriton_torchtrt.so"),
        "torchtrtc": os.path.join(out, "torchtrtc"),
        "plugin": os.path.join(out, "libtorchtrt_example_plugin_rust.so"),
    }


def prebuilt(folder):
    """The binaries `build` makes, already built into `folder`."""
    built = {
        "backend": os.path.join(folder, "libtriton_torchtrt.so"),
        "torchtrtc": os.path.join(folder, "torchtrtc"),
        "plugin": os.path.join(folder, "libtorchtrt_example_plugin_rust.so"),
    }
    missing = [p for p in built.values() if not os.path.isfile(p)]
    if missing:
        raise SystemExit(f"--prebuilt: missing {', '.join(missing)}")
    return built


def tritonserver_binary():
    """`$TRITONSERVER` when set, else the binary of the `nvidia-pytriton` wheel."""
    if os.environ.get("TRITONSERVER"):
        return os.environ["TRITONSERVER"]
    import pytriton

    path = os.path.join(os.path.dirname(pytriton.__file__), "tritonserver", "bin", "tritonserver")
    if not os.path.isfile(path):
        sys.exit(f"no tritonserver in the nvidia-pytriton wheel at {path}")
    return path


def config(name, *, max_batch=0, batching=False, instances=1, kind="KIND_CPU", params=None):
    lines = [f'name: "{name}"', 'backend: "torchtrt"', f"max_batch_size: {max_batch}"]
    if batching:
        lines.append("dynamic_batching { max_queue_delay_microseconds: 2000 }")
    gpus = " gpus: [0]" if kind == "KIND_GPU" else ""
    lines.append(f"instance_group [ {{ count: {instances} kind: {kind}{gpus} }} ]")
    for key, value in (params or {}).items():
        lines.append(f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}')
    return "\n".join(lines) + "\n"


def make_repo(tmp, built, kind, models_dir):
    """The model repository and backend directory; returns (repo, backends)."""
    repo = os.path.join(tmp, "repo")
    backends = os.path.join(tmp, "backends")
    os.makedirs(os.path.join(backends, "torchtrt"))
    shutil.copy(built["backend"], os.path.join(backends, "torchtrt", "libtriton_torchtrt.so"))

    def add(name, cfg, files):
        os.makedirs(os.path.join(repo, name, "1"))
        with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
            f.write(cfg)
        for src, dst in files:
            shutil.copy(src, os.path.join(repo, name, "1", dst))

    device = "cuda" if kind == "KIND_GPU" else "cpu"
    engine = os.path.join(tmp, "demo.engine")
    subprocess.run([built["torchtrtc"], "compile", os.path.join(ROOT, "models/demo/demo.onnx"),
                    "-o", engine, "--device", device], check=True)
    add("demo", config("demo", kind=kind), [(engine, "model.engine")])
    cnn = os.path.join(models_dir, "cnn.onnx")
    add("cnn", config("cnn", max_batch=8, batching=True, instances=2, kind=kind),
        [(cnn, "model.onnx")])
    add("cnn_plain", config("cnn_plain", max_batch=8, kind=kind), [(cnn, "model.onnx")])
    add("swish", config("swish", max_batch=8, batching=True, kind=kind,
                        params={"plugins": built["plugin"], "dynamic_range": "1;8;16"}),
        [(os.path.join(models_dir, "swish.onnx"), "model.onnx")])
    add("nms", config("nms", kind=kind), [(os.path.join(models_dir, "nms.onnx"), "model.onnx")])
    return repo, backends


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A tritonserver on 127.0.0.1, stopped on exit."""

    def __init__(self, repo, backends, log_path):
        self.http, self.grpc, self.metrics = free_port(), free_port(), free_port()
        self.log_path = log_path
        cmd = [tritonserver_binary(), "--model-repository", repo, "--backend-directory", backends,
               "--http-address", "127.0.0.1", "--http-port", str(self.http),
               "--grpc-address", "127.0.0.1", "--grpc-port", str(self.grpc),
               "--metrics-port", str(self.metrics), "--allow-metrics", "false",
               "--log-verbose", "0", "--exit-timeout-secs", "5"]
        self.log_file = open(log_path, "w")
        log("starting " + " ".join(cmd))
        self.proc = subprocess.Popen(cmd, stdout=self.log_file, stderr=subprocess.STDOUT)

    def wait_ready(self):
        deadline = time.monotonic() + READY_TIMEOUT_S
        url = f"http://127.0.0.1:{self.http}/v2/health/ready"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tritonserver exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"tritonserver not ready after {READY_TIMEOUT_S} s:\n{self.tail()}")

    def tail(self, n=60):
        self.log_file.flush()
        with open(self.log_path) as f:
            return "".join(f.readlines()[-n:])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log_file.close()


def torchtrtc_run(built, model, x, tmp, device, plugins=None):
    """`torchtrtc run` on `model` with input `x` (an array, or a dict of named arrays): the
    reference output `y`."""
    d = tempfile.mkdtemp(dir=tmp)
    inputs = x if isinstance(x, dict) else {"x": x}
    cmd = [built["torchtrtc"], "run", model, "--output-dir", d, "--device", device]
    for name, value in inputs.items():
        np.save(os.path.join(d, f"{name}.npy"), value)
        cmd += ["--input", f"{name}={d}/{name}.npy"]
    if plugins:
        cmd += ["--plugins", plugins]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return np.load(os.path.join(d, "y.npy"))


class Checks:
    def __init__(self, server, built, tmp, models_dir, device, atol):
        import tritonclient.grpc as grpcclient
        import tritonclient.http as httpclient

        self.http_mod, self.grpc_mod = httpclient, grpcclient
        self.url = f"127.0.0.1:{server.http}"
        self.local = threading.local()
        self.grpc = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc}")
        self.built, self.tmp, self.models_dir = built, tmp, models_dir
        self.device, self.atol = device, atol
        self.rng = np.random.default_rng(SEED)
        self.failures = []
        self.passed = 0

    @property
    def http(self):
        """This thread's HTTP client (the clients are not thread-safe)."""
        if not hasattr(self.local, "client"):
            self.local.client = self.http_mod.InferenceServerClient(
                self.url, network_timeout=REQUEST_TIMEOUT_S)
        return self.local.client

    def infer(self, model, x, name="x", dtype="FP32"):
        inp = self.http_mod.InferInput(name, list(x.shape), dtype)
        inp.set_data_from_numpy(x)
        return self.http.infer(model, [inp], timeout=REQUEST_TIMEOUT_S).as_numpy("y")

    def close(self, what, got, want, atol=None):
        atol = self.atol if atol is None else atol
        if got is None or got.shape != want.shape or not np.allclose(got, want, atol=atol, rtol=atol):
            diff = "shape" if got is None or got.shape != want.shape else np.abs(got - want).max()
            raise AssertionError(f"{what}: differs from the reference (max |diff| {diff})")

    def expect_error(self, what, needle, call):
        from tritonclient.utils import InferenceServerException

        try:
            call()
        except InferenceServerException as e:
            if needle not in str(e):
                raise AssertionError(f"{what}: error `{e}` does not mention `{needle}`")
            return
        raise AssertionError(f"{what}: no error")

    def run(self, test):
        name = test.__name__
        t0 = time.monotonic()
        try:
            test()
        except Exception as e:  # noqa: BLE001 - every failure is reported, the rest still run
            self.failures.append(name)
            log(f"FAIL {name}: {type(e).__name__}: {e}")
            return
        self.passed += 1
        log(f"ok   {name} ({time.monotonic() - t0:.1f} s)")

    def cnn_reference(self, x):
        return torchtrtc_run(self.built, os.path.join(self.models_dir, "cnn.onnx"), x, self.tmp,
                             self.device)

    def test_configuration_completed_from_the_engine(self):
        cfg = self.http.get_model_config("cnn")
        assert cfg["max_batch_size"] == 8, cfg
        (inp,) = cfg["input"]
        assert (inp["name"], inp["data_type"], inp["dims"]) == ("x", "TYPE_FP32", [3, 8, 8]), inp
        (out,) = cfg["output"]
        assert (out["name"], out["data_type"], out["dims"]) == ("y", "TYPE_FP32", [5]), out
        demo = self.http.get_model_config("demo")
        assert demo["max_batch_size"] == 0, demo
        assert demo["input"][0]["dims"] == [1, 3, 16, 16], demo["input"]
        assert demo["output"][0]["dims"] == [1, 8, 7, 7], demo["output"]
        nms = self.http.get_model_config("nms")
        assert nms["max_batch_size"] == 0, nms
        assert [(o["name"], o["data_type"], o["dims"]) for o in nms["output"]] == \
            [("y", "TYPE_INT64", [-1, 3])], nms["output"]

    def test_demo_single_request_http_and_grpc(self):
        x = np.load(os.path.join(ROOT, "models/demo/x.npy"))
        want = torchtrtc_run(self.built, os.path.join(ROOT, "models/demo/demo.onnx"), x,
                             self.tmp, self.device)
        self.close("demo over HTTP", self.infer("demo", x), want)
        self.close("demo vs its numpy golden", self.infer("demo", x),
                   np.load(os.path.join(ROOT, "models/demo/y.npy")), atol=max(self.atol, 1e-4))
        inp = self.grpc_mod.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        got = self.grpc.infer("demo", [inp], client_timeout=REQUEST_TIMEOUT_S).as_numpy("y")
        self.close("demo over gRPC", got, want)

    def test_cnn_batched_request(self):
        x = self.rng.standard_normal((4, 3, 8, 8)).astype(np.float32)
        self.close("cnn batch of 4", self.infer("cnn", x), self.cnn_reference(x))
        self.close("cnn_plain batch of 4", self.infer("cnn_plain", x), self.cnn_reference(x))

    def test_cnn_concurrent_requests_are_batched(self):
        rows = self.rng.standard_normal((48, 3, 8, 8)).astype(np.float32)
        want = self.cnn_reference(rows)
        before = self.inference_stats("cnn")
        slices = []
        at = 0
        for i in range(32):
            b = 1 + i % 2
            slices.append((at, at + b))
            at += b
        with ThreadPoolExecutor(16) as pool:
            got = list(pool.map(lambda s: self.infer("cnn", rows[s[0]:s[1]]), slices))
        for (lo, hi), y in zip(slices, got):
            self.close(f"cnn rows {lo}..{hi}", y, want[lo:hi])
        after = self.inference_stats("cnn")
        inferences = after[0] - before[0]
        executions = after[1] - before[1]
        log(f"     cnn: {inferences} inferences in {executions} executions")
        assert inferences == at, (inferences, at)
        assert executions < 32, f"32 concurrent requests ran in {executions} executions: no batching"

    def inference_stats(self, model):
        stats = self.http.get_inference_statistics(model)["model_stats"][0]
        return stats["inference_count"], stats["execution_count"]

    def test_bad_requests_get_errors_and_the_next_good_one_succeeds(self):
        x = self.rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
        want = self.cnn_reference(x)
        bad_shape = self.rng.standard_normal((2, 3, 9, 9)).astype(np.float32)
        self.expect_error("cnn wrong shape", "shape", lambda: self.infer("cnn", bad_shape))
        self.close("cnn after a wrong shape", self.infer("cnn", x), want)
        self.expect_error("cnn wrong dtype", "FP64", lambda: self.infer("cnn", x.astype(np.float64), dtype="FP64"))
        self.close("cnn after a wrong dtype", self.infer("cnn", x), want)
        self.expect_error("cnn wrong name", "z", lambda: self.infer("cnn", x, name="z"))
        self.close("cnn after a wrong name", self.infer("cnn", x), want)
        wide = self.rng.standard_normal((1, 32)).astype(np.float32)
        self.expect_error("swish outside the profile", "request shapes", lambda: self.infer("swish", wide))
        ok = self.rng.standard_normal((1, 16)).astype(np.float32)
        self.close("swish after a shape outside the profile", self.infer("swish", ok), self.swish_numpy(ok))

    def test_bad_request_among_concurrent_good_ones(self):
        good = self.rng.standard_normal((8, 12)).astype(np.float32)
        wide = self.rng.standard_normal((1, 20)).astype(np.float32)
        with ThreadPoolExecutor(9) as pool:
            futures = [pool.submit(self.infer, "swish", good[i:i + 1]) for i in range(8)]
            bad = pool.submit(self.infer, "swish", wide)
            got = [f.result() for f in futures]
        for i, y in enumerate(got):
            self.close(f"swish row {i}", y, self.swish_numpy(good[i:i + 1]))
        self.expect_error("swish outside the profile, concurrent", "request shapes", bad.result)

    def swish_numpy(self, x):
        beta = gen_triton_models.SWISH_BETA
        return (2.0 * x / (1.0 + np.exp(-beta * x.astype(np.float64)))).astype(np.float32)

    def nms_boxes(self, n, score_hi):
        corner = self.rng.uniform(0, 8, (n, 2))
        size = self.rng.uniform(1, 4, (n, 2))
        boxes = np.concatenate([corner, corner + size], axis=1)[None].astype(np.float32)
        scores = self.rng.uniform(0, score_hi, (1, 1, n)).astype(np.float32)
        return boxes, scores

    def test_run_sized_output_matches_torchtrtc_and_numpy(self):
        for n, score_hi, protocol in [(24, 1.0, "http"), (9, 1.0, "grpc"), (5, 0.1, "http")]:
            boxes, scores = self.nms_boxes(n, score_hi)
            mod = self.http_mod if protocol == "http" else self.grpc_mod
            client = self.http if protocol == "http" else self.grpc
            inputs = [mod.InferInput("boxes", list(boxes.shape), "FP32"),
                      mod.InferInput("scores", list(scores.shape), "FP32")]
            inputs[0].set_data_from_numpy(boxes)
            inputs[1].set_data_from_numpy(scores)
            got = client.infer("nms", inputs).as_numpy("y")
            want = nms_numpy(boxes, scores)
            if score_hi < gen_triton_models.NMS_SCORE and want.shape != (0, 3):
                raise AssertionError(f"the empty case selects {want.shape[0]} boxes")
            cli = torchtrtc_run(self.built, os.path.join(self.models_dir, "nms.onnx"),
                                {"boxes": boxes, "scores": scores}, self.tmp, self.device)
            for what, ref in [("torchtrtc", cli), ("numpy", want)]:
                if got is None or got.shape != ref.shape or not np.array_equal(got, ref):
                    raise AssertionError(
                        f"nms over {protocol}, {n} boxes: {None if got is None else got.tolist()} "
                        f"vs {what} {ref.tolist()}")

    def test_plugin_model_matches_torchtrtc_and_numpy(self):
        x = self.rng.standard_normal((3, 10)).astype(np.float32)
        got = self.infer("swish", x)
        want = torchtrtc_run(self.built, os.path.join(self.models_dir, "swish.onnx"), x, self.tmp,
                             self.device, plugins=self.built["plugin"])
        self.close("swish vs torchtrtc", got, want)
        self.close("swish vs numpy", got, self.swish_numpy(x), atol=max(self.atol, 1e-5))


def nms_numpy(boxes, scores):
    """The ONNX NonMaxSuppression of one batch and class: boxes by descending score (ties
    by index), each kept unless at or below the score threshold or overlapping a kept box
    by more than the IoU threshold, at most NMS_MAX; rows [0, 0, box]."""
    b, s = boxes[0].astype(np.float64), scores[0, 0].astype(np.float64)
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    keep = []
    for i in sorted(range(len(s)), key=lambda i: (-s[i], i)):
        if s[i] <= gen_triton_models.NMS_SCORE or len(keep) == gen_triton_models.NMS_MAX:
            continue
        ok = True
        for j in keep:
            h = max(0.0, min(b[i, 2], b[j, 2]) - max(b[i, 0], b[j, 0]))
            w = max(0.0, min(b[i, 3], b[j, 3]) - max(b[i, 1], b[j, 1]))
            inter = h * w
            if inter / (area[i] + area[j] - inter) > gen_triton_models.NMS_IOU:
                ok = False
                break
        if ok:
            keep.append(i)
    return np.array([[0, 0, i] for i in keep], dtype=np.int64).reshape(-1, 3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", choices=["cpu", "gpu"], default="cpu")
    ap.add_argument("--profile", choices=["test", "dev", "release"], default="test")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--prebuilt", metavar="DIR",
                    help="take the backend, torchtrtc and the example plugin from DIR instead of "
                         "building them (a machine without Rust)")
    args = ap.parse_args()
    started = time.monotonic()
    built = prebuilt(args.prebuilt) if args.prebuilt else build(args.profile)
    tmp = tempfile.mkdtemp(prefix="torchtrt-triton-")
    kind = "KIND_GPU" if args.kind == "gpu" else "KIND_CPU"
    device = "cuda" if args.kind == "gpu" else "cpu"
    models_dir = os.path.join(tmp, "models")
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts/gen_triton_models.py"), models_dir],
                   check=True)
    repo, backends = make_repo(tmp, built, kind, models_dir)
    server = Server(repo, backends, os.path.join(tmp, "tritonserver.log"))
    failed = True
    try:
        server.wait_ready()
        log(f"server ready after {time.monotonic() - started:.1f} s (build included)")
        checks = Checks(server, built, tmp, models_dir, device, 1e-5 if device == "cpu" else 2e-3)
        for test in [
            checks.test_configuration_completed_from_the_engine,
            checks.test_demo_single_request_http_and_grpc,
            checks.test_cnn_batched_request,
            checks.test_cnn_concurrent_requests_are_batched,
            checks.test_bad_requests_get_errors_and_the_next_good_one_succeeds,
            checks.test_bad_request_among_concurrent_good_ones,
            checks.test_plugin_model_matches_torchtrtc_and_numpy,
            checks.test_run_sized_output_matches_torchtrtc_and_numpy,
        ]:
            checks.run(test)
        if server.proc.poll() is not None:
            checks.failures.append("server still running")
        failed = bool(checks.failures)
        log(f"{checks.passed} passed, {len(checks.failures)} failed "
            f"({time.monotonic() - started:.1f} s)")
    finally:
        server.stop()
        if failed:
            log("server log (tail):\n" + server.tail())
        if args.keep or failed:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
