#!/usr/bin/env bash
# Packs what a GPU machine without Rust needs to run the CUDA test suites and the GPU
# benchmarks: the stripped release torchtrtc and the CUDA-relevant test binaries (built
# here, debug profile), as DIR/torchtrtc and DIR/tests.tar.xz. DIR is then carried to the
# device (it must be git-ignored: .device-bin is) and run there with scripts/gpu_suite.sh.
#
#   bash scripts/gpu_pack.sh [DIR]        (default .device-bin)
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-.device-bin}"
mkdir -p "$dir"
cargo build --release --locked -p torchtrtc
strip -o "$dir/torchtrtc" "${CARGO_TARGET_DIR:-target}/release/torchtrtc"
stage="$(mktemp -d)"
mkdir -p "$stage/tests"
cargo test --locked -p torchtrt-cuda -p torchtrt --no-run --message-format=json 2>/dev/null |
  python3 -c '
import json, sys
want = {s.split(":")[0] for s in sys.argv[1].split()}
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        name = m["target"]["name"].replace("-", "_")
        if name in want:
            print(name, m["executable"])
' "$(sed -n 's/^SUITES="\(.*\)"$/\1/p' scripts/gpu_suite.sh)" |
  while read -r name exe; do strip -o "$stage/tests/$name" "$exe"; done
tar cf - -C "$stage" tests | xz -T2 -6 > "$dir/tests.tar.xz"
rm -rf "$stage"
ls -la "$dir"
