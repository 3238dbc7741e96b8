#!/usr/bin/env bash
# Runs the CUDA test suites on a GPU machine from what scripts/gpu_pack.sh packed into DIR:
# every binary of SUITES (the torchtrt-cuda crate's library and tests, and the torchtrt
# tests that build CUDA engines), each under a time limit, printing each one's result line.
# Suites named after DIR run alone (e.g. `kernels_compute`); `NAME:FILTER` runs only the
# tests of NAME whose names hold FILTER (`int8:cuda`, `layouts:cuda`: their other tests need
# the PyTorch programs or ONNX networks the test data scripts make, which the device does
# not have; CI runs them).
#
#   bash scripts/gpu_suite.sh [DIR] [SUITE...]
set -u
cd "$(dirname "$0")/.."
SUITES="torchtrt_cuda blas context context_images device engine fusion kernels_compute kernels_shuffle tf32 cuda layouts:cuda int8:cuda"
dir="${1:-.device-bin}"
shift || true
suites="${*:-$SUITES}"
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
work="$(mktemp -d)"
tar xJf "$dir/tests.tar.xz" -C "$work"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in $suites; do
  echo "== $t"
  name="${t%%:*}"
  filter=""
  [[ "$t" == *:* ]] && filter="${t#*:}"
  timeout 540 "$work/tests/$name" $filter 2>&1 | grep -E "test result|panicked|FAILED|failed" | tail -6
done
rm -rf "$work"
