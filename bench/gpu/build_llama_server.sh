#!/usr/bin/env bash
# Build llama-server with CUDA for Hopper (sm_90) from the GPU payload's llama.cpp.
#
# Usage (on the GPU machine, from anywhere):
#     bash bench/gpu/build_llama_server.sh [LLAMA_CPP_DIR] [JOBS]
#
# LLAMA_CPP_DIR defaults to the llama.cpp tree inside .gpu_payload/ (bench.gpu.pack puts
# it there); JOBS to 16. The build is bench.llama_server's (same flags as the CPU build,
# plus -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90, Ninja), cached under
# $FIMLSP_CACHE_DIR/llama-server/; the last line printed is the binary's path.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

src="${1:-}"
if [ -z "$src" ]; then
    for candidate in .gpu_payload/llama.cpp .gpu_payload/*/llama.cpp .gpu_payload/*; do
        if [ -f "$candidate/CMakeLists.txt" ] && [ -d "$candidate/ggml" ]; then
            src="$candidate"
            break
        fi
    done
fi
if [ -z "$src" ]; then
    echo "build_llama_server.sh: no llama.cpp tree under .gpu_payload/ (run python3 -m bench.gpu.pack here first)" >&2
    exit 2
fi
export CUDACXX="${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
python3 -m bench.llama_server --source "$src" --cuda --jobs "${2:-16}"
