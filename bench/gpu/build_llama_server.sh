#!/usr/bin/env bash
# Build llama-server with CUDA for Hopper (sm_90) on the GPU machine, offline.
#
# Usage (from anywhere; the repository's .gpu_payload/ carried):
#     bash bench/gpu/build_llama_server.sh [SOURCES] [JOBS]
#
# SOURCES: the payload's llama-server-src-<version>.tar.xz (python -m bench.gpu.server_source
# writes it here), or a llama.cpp tree; JOBS: 16. The build is bench.llama_server's, the
# CPU build's flags plus -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90, with Ninja, cached
# under $FIMLSP_CACHE_DIR/llama-server/. Where the CUDA toolkit has no cuBLAS (one put
# together from pip packages), bench.gpu.run's find_cublas finds the Python package's, and
# the binary gets its folder as RPATH. The last line printed is the binary's path.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

src="${1:-}"
if [ -z "$src" ]; then
    src="$(ls .gpu_payload/llama-server-src-*.tar.xz 2>/dev/null | head -1 || true)"
fi
if [ -z "$src" ] || [ ! -e "$src" ]; then
    echo "build_llama_server.sh: no llama-server sources (run python3 -m bench.gpu.server_source here first)" >&2
    exit 2
fi
if [ -d "$src" ]; then from=(--source "$src"); else from=(--sdist "$src"); fi

if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
fi
export CUDACXX="${CUDACXX:-$(command -v nvcc)}"

# cuBLAS outside the toolkit: CMake arguments, one per line, then "rpath DIR".
mapfile -t cublas < <(python3 - <<'PY' || true
import tempfile
from pathlib import Path
try:
    from bench.gpu.run import find_cublas
except ImportError:
    raise SystemExit(0)  # bench.gpu.run (issue 32's device driver) not here: the toolkit's
args, libs = find_cublas(Path(tempfile.mkdtemp(prefix="cublas-")))
print("\n".join(args))
if libs:
    print(f"-DCMAKE_BUILD_RPATH={';'.join(libs)}")
PY
)
extra=()
for arg in "${cublas[@]}"; do
    [ -n "$arg" ] && extra+=("--cmake-arg=$arg")
done
[ ${#extra[@]} -gt 0 ] && echo "cuBLAS from Python packages: ${cublas[*]}" >&2

# The driver library (ggml-cuda links it for its VMM pool): the toolkit's stub, else the
# driver's own libcuda; with neither, the pool without VMM.
toolkit="$(dirname "$(dirname "$(readlink -f "$CUDACXX")")")"
if ! ls "$toolkit"/lib64/stubs/libcuda.so "$toolkit"/lib/stubs/libcuda.so \
        "$toolkit"/targets/x86_64-linux/lib/stubs/libcuda.so >/dev/null 2>&1; then
    driver="$(ls /usr/local/nvidia/lib64/libcuda.so* /usr/lib/x86_64-linux-gnu/libcuda.so* \
        /usr/lib64/libcuda.so* 2>/dev/null | head -1 || true)"
    if [ -n "$driver" ]; then
        extra+=("--cmake-arg=-DCUDA_cuda_driver_LIBRARY=$driver")
    else
        extra+=("--cmake-arg=-DGGML_CUDA_NO_VMM=ON")
    fi
    echo "no libcuda stub in $toolkit: ${extra[*]: -1}" >&2
fi
python3 -m bench.llama_server "${from[@]}" --cuda --jobs "${2:-16}" "${extra[@]}"
