#!/usr/bin/env bash
# The kernel-plugin example end to end: compiles an ONNX model whose activation is the SwiGLU
# kernel plugin of swiglu.toml, then runs the engine with nothing loaded (no spec, no plugin
# library) through `torchtrtc run` and through the lean C runtime app
# (examples/runtime_app_c), checks both against numpy, and prints `ok`.
#
#   examples/kernel_plugin/run.sh [cpu|cuda]
#
# On CUDA it also builds and checks an f16 engine. Environment: TORCHTRTC (a torchtrtc
# binary; default: cargo builds one), LEAN_RUNTIME_DIR (a folder holding the lean
# libtorchtrt_runtime.so; default: cargo builds it), PYTHON (with numpy and onnx).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
device="${1:-cpu}"
python="${PYTHON:-}"
if [ -z "$python" ]; then
  if [ -x "$root/.venv/bin/python" ]; then python="$root/.venv/bin/python"; else python=python3; fi
fi
if [ -z "${TORCHTRTC:-}" ]; then
  cargo build -q --manifest-path "$root/Cargo.toml" -p torchtrtc
  TORCHTRTC="$root/target/debug/torchtrtc"
fi
if [ -z "${LEAN_RUNTIME_DIR:-}" ]; then
  cargo build -q --manifest-path "$root/Cargo.toml" -p torchtrt-runtime --no-default-features \
    --target-dir "$root/target/ext-tests/runtime"
  LEAN_RUNTIME_DIR="$root/target/ext-tests/runtime/debug"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$python" "$here/make_model.py" "$work"
make -s -C "$root/examples/runtime_app_c" OUT="$work" RUNTIME_DIR="$LEAN_RUNTIME_DIR" \
  INCLUDE="$root/include"

# CPU engines carry the compiled C, which loading runs: the run must allow it. CUDA engines
# whose plugin layers run on the GPU carry CUDA images only and need no such permission.
host_code=()
if [ "$device" = cpu ]; then host_code=(--allow-engine-host-code); fi

check() {
  local precision="$1" tol="$2"
  "$TORCHTRTC" -q compile "$work/model.onnx" -o "$work/model.engine" --device "$device" \
    --precision "$precision" --kernel-plugins "$here/swiglu.toml" \
    --input 'x=1x1x64;2x16x64;4x32x64'
  # From another folder, with no spec and no library: the engine carries the plugin.
  (cd "$work" && mkdir -p elsewhere && cd elsewhere &&
    "$TORCHTRTC" -q run "$work/model.engine" ${host_code[@]+"${host_code[@]}"} \
      --input x="$work/x.npy" --check y="$work/ref.npy" --atol "$tol" --rtol "$tol" \
      > "$work/run.txt") || { cat "$work/run.txt" >&2; exit 1; }
  "$work/runtime_app" "$work/model.engine" ${host_code[@]+"${host_code[@]}"} > "$work/app.txt"
  grep -q "built-in plugins: no" "$work/app.txt"
  "$python" "$here/check_app.py" "$work" "$tol" "$tol" < "$work/app.txt"
}

check f32 1e-4
if [ "$device" != cpu ]; then
  check f16 3e-2
fi
echo ok
