#!/usr/bin/env bash
# The one command for the GPU machine (issue 32): see bench/gpu/run.py and bench/gpu/README.md.
#     bash bench/gpu/run.sh [--out DIR] [--budget-s 540] [--n 8] [--cpu-smoke]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PYTHONUNBUFFERED=1
exec python3 -m bench.gpu.run "$@"
