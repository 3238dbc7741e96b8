#!/usr/bin/env python3
"""BERT-base and the real-model suite through `torchtrtc bench` contenders and onnxruntime in
interleaved rounds (`interleaved.py`): for comparing builds, or one build with and without an
environment setting, on a machine whose speed drifts. Prints, per model and contender, the
minimum, 25th percentile and median of the rounds' medians (2 threads unless `--threads`).

    .venv/bin/python bench/models_interleaved.py --torchtrtc base=/tmp/torchtrtc.old \\
        --torchtrtc new=target/release/torchtrtc --torchtrtc nospin=target/release/torchtrtc,TORCHTRT_CPU_SPIN=0 \\
        --bert [--suite target/model-suite-full --models efficientnet] [--rounds 6] [--runs 10]

`--bert` exports BERT-base (seq 128, seeded random weights) into `--work` once and reuses it.
"""

import json
import os

import numpy as np

import interleaved
from models_vs_onnxruntime import bert


def bert_case(work, seq):
    """BERT-base's model path and inputs, exported on first use."""
    path = os.path.join(work, f"bert_base_s{seq}.onnx")
    names = ["input_ids", "attention_mask"]
    if not all(os.path.exists(p) for p in [path] + [os.path.join(work, f"{n}.npy") for n in names]):
        _, feeds = bert(work, seq)
        for n, v in feeds.items():
            np.save(os.path.join(work, f"{n}.npy"), v)
    return f"bert_base_s{seq}", path, {n: os.path.join(work, f"{n}.npy") for n in names}


def suite_cases(suite, only):
    """The suite's models (those named in `only`, if any) on their first case."""
    with open(os.path.join(suite, "manifest.json")) as f:
        manifest = json.load(f)
    for m in manifest["models"]:
        if only and m["name"] not in only:
            continue
        d = os.path.join(suite, m["name"])
        case = os.path.join(d, m["cases"][0], "inputs")
        yield m["name"], os.path.join(d, "model.onnx"), {i: os.path.join(case, f"{i}.npy") for i in m["inputs"]}


def main():
    parser = interleaved.parser(__doc__, rounds=6, runs=10)
    parser.add_argument("--bert", action="store_true")
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--suite", help="a directory written by scripts/gen_model_suite.py")
    parser.add_argument("--models", nargs="*", default=[], help="the suite's models to run (default: all)")
    parser.add_argument("--work", default="target/bert")
    args = parser.parse_args()
    cases = []
    if args.bert:
        os.makedirs(args.work, exist_ok=True)
        cases.append(bert_case(args.work, args.seq))
    if args.suite:
        cases += list(suite_cases(args.suite, args.models))
    contenders = interleaved.start(args, "model")
    for name, model, inputs in cases:
        flags = [f for n, p in inputs.items() for f in ("--input", f"{n}={p}")]
        feeds = {n: np.load(p) for n, p in inputs.items()}
        medians = interleaved.rounds(model, flags, feeds, contenders, args.rounds, args.runs, args.threads)
        interleaved.row(name, medians)


if __name__ == "__main__":
    main()
