"""The real-model suite (issue 24) on a GPU through `torchtrtc run --device cuda`: every
model and case of a suite made by `scripts/gen_model_suite.py OUT --f16` (which records
PyTorch's own f16 error on the GPU) is run in f32 and in f16, and checked against PyTorch's
f32 outputs:

- f32: every element within atol + 1e-4·|ref|, atol being 1e-4 of the output's largest
  magnitude (the CPU test's bound), and the largest difference reported relative to it;
- f16: the largest difference relative to the output's largest magnitude must be at most
  3× PyTorch's own f16 error on the same case.

One markdown table (model, case, output, errors, verdict, engine build time) and a JSON
file of the same rows. Exit status 1 when any row fails.

By default each case is compiled at its own shapes (`torchtrtc run model.onnx`). With
`--dynamic`, each model is compiled once per precision with its dynamic dims (batch, and
sequence for text: `torchtrtc compile`, as a user deploys it) and every case runs on that
one engine (`torchtrtc run model.engine`); the run time column is then the case's run alone.

    python3 bench/gpu_model_suite.py --exe .device-bin/torchtrtc --suite DIR [--generate] [--dynamic] [NAME...]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

F16_FACTOR = 3.0


def compile_engine(exe, device, model_dir, precision, engine):
    """`model.onnx` compiled with its dynamic dims into `engine`; the last line of the error
    when it does not compile."""
    args = [exe, "compile", os.path.join(model_dir, "model.onnx"), "-o", engine, "--device", device, "--precision", precision, "-q"]
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        return (done.stderr or done.stdout).strip().splitlines()[-1:]
    return []


def run_engine(exe, device, model_dir, entry, case, precision, out_dir, engine=None):
    if engine is None:
        args = [exe, "run", os.path.join(model_dir, "model.onnx"), "--device", device, "--precision", precision]
    else:
        args = [exe, "run", engine]
    for name in entry["inputs"]:
        args += ["--input", f"{name}={os.path.join(model_dir, case, 'inputs', name + '.npy')}"]
    args += ["--output-dir", out_dir, "--quiet"]
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        return None, seconds, (done.stderr or done.stdout).strip().splitlines()[-1:]
    return out_dir, seconds, []


def compare(got, want, atol, relative):
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    scale = float(np.abs(want).max())
    worst = float(diff.max()) / scale if scale > 0 else float("inf")
    inside = bool(np.all(diff <= atol + relative * np.abs(want))) and bool(np.all(np.isfinite(got)))
    return worst, inside


def check_model(exe, device, root, entry, precisions, relative, f16_cases, f16_start, dynamic):
    rows = []
    model_dir = os.path.join(root, entry["name"])
    with tempfile.TemporaryDirectory() as engines:
        for precision in precisions:
            rows += check_precision(exe, device, model_dir, entry, precision, relative, f16_cases, f16_start, dynamic, engines)
    return rows


def check_precision(exe, device, model_dir, entry, precision, relative, f16_cases, f16_start, dynamic, engines):
    rows = []
    if precision == "f16":
        cases = entry["cases"][f16_start:][:f16_cases]
    else:
        cases = entry["cases"]
    engine = None
    if dynamic:
        engine = os.path.join(engines, f"{precision}.engine")
        error = compile_engine(exe, device, model_dir, precision, engine)
        if error:
            row = {"model": entry["name"], "case": "compile", "output": "", "precision": precision, "seconds": 0.0}
            return [dict(row, error=" ".join(error), ok=False)]
    for case in cases:
        with tempfile.TemporaryDirectory() as tmp:
            out, seconds, error = run_engine(exe, device, model_dir, entry, case, precision, tmp, engine)
            for o in entry["outputs"]:
                row = {"model": entry["name"], "case": case, "output": o["name"], "precision": precision, "seconds": seconds}
                if out is None:
                    row.update(error=" ".join(error), ok=False)
                    rows.append(row)
                    continue
                want = np.load(os.path.join(model_dir, case, "outputs", o["name"] + ".npy"))
                got = np.load(os.path.join(out, o["name"] + ".npy"))
                if got.shape != want.shape:
                    row.update(error=f"shape {list(got.shape)}, PyTorch {list(want.shape)}", ok=False)
                elif precision == "f32":
                    worst, inside = compare(got, want, o["atol"], relative)
                    row.update(error_ours=worst, ok=inside)
                else:
                    worst, _ = compare(got, want, 0.0, 0.0)
                    torch_error = entry["f16_error"][case][o["name"]]
                    row.update(error_ours=worst, error_torch=torch_error, ok=bool(worst <= F16_FACTOR * torch_error))
                rows.append(row)
    return rows


def table(rows):
    lines = [
        "| model | case | output | precision | ours, max diff / max ref | PyTorch f16, same | verdict | run s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ours = f"{r['error_ours']:.2e}" if "error_ours" in r else r.get("error", "")
        torch_error = f"{r['error_torch']:.2e}" if "error_torch" in r else ""
        verdict = "ok" if r["ok"] else "FAIL"
        lines.append(
            f"| {r['model']} | {r['case']} | {r['output']} | {r['precision']} | {ours} | {torch_error} | {verdict} | {r['seconds']:.1f} |"
        )
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exe", required=True, help="the torchtrtc to run")
    ap.add_argument("--suite", required=True, help="the suite's folder")
    ap.add_argument("--generate", action="store_true", help="export the full-size suite there first (--full --f16)")
    ap.add_argument("--precision", action="append", choices=["f32", "f16"], help="default: both")
    ap.add_argument("--device", default="cuda", help="torchtrtc's --device (default cuda)")
    ap.add_argument("--f16-cases", type=int, default=None, help="check only N cases in f16")
    ap.add_argument("--f16-start", type=int, default=0, help="the first case checked in f16 (default 0)")
    ap.add_argument("--dynamic", action="store_true", help="compile each model once with its dynamic dims and run every case on that engine")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    if args.generate:
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "gen_model_suite.py")
        subprocess.run([sys.executable, script, args.suite, "--full", "--f16", *args.names], check=True)
    with open(os.path.join(args.suite, "manifest.json")) as f:
        manifest = json.load(f)
    precisions = args.precision or ["f32", "f16"]
    if "f16" in precisions and not manifest.get("f16"):
        sys.exit("the suite has no PyTorch f16 errors: generate it with --f16 on a GPU")
    rows = []
    for entry in manifest["models"]:
        if args.names and entry["name"] not in args.names:
            continue
        rows += check_model(args.exe, args.device, args.suite, entry, precisions, manifest["relative"], args.f16_cases, args.f16_start, args.dynamic)
        print(table([r for r in rows if r["model"] == entry["name"]]).split("\n", 2)[-1], flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
    print(table(rows))
    failed = [r for r in rows if not r["ok"]]
    print(f"{len(rows) - len(failed)} of {len(rows)} rows ok")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
