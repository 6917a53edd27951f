#!/usr/bin/env bash
# Issue 33 on the GPU machine in one command (bench/gpu/team.py says what it runs):
#     bash bench/gpu/team.sh [--out DIR] [--budget-s 530] [--seconds 15] [--cpu-smoke]
# The payload's wheels (pygls, lsprotocol, cattrs, ...) go into a private folder first on
# PYTHONPATH where the image lacks them; the results go to $OUT.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
if ! python3 -c "import pygls, lsprotocol, cattrs" 2>/dev/null; then
    if ls .gpu_payload/wheels/*.whl >/dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/fimlsp-site .gpu_payload/wheels/*.whl || exit 1
        export PYTHONPATH="/tmp/fimlsp-site${PYTHONPATH:+:$PYTHONPATH}"
    else
        echo "team.sh: pygls is missing and .gpu_payload/wheels holds no wheels (python3 -m bench.gpu.pack)" >&2
        exit 2
    fi
fi
export PYTHONUNBUFFERED=1
exec python3 -m bench.gpu.team "$@"
