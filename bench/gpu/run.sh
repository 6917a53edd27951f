#!/usr/bin/env bash
# Build llama-cpp-python with CUDA and record decoding speed and parser overhead on the GPU.
#
# Usage (on a machine with an NVIDIA GPU, the CUDA toolkit and this repository installed):
#     bash bench/gpu/run.sh [N_CUTS] [OUT_DIR]
#
# 1. rebuilds llama-cpp-python (the installed version) with -DGGML_CUDA=on;
# 2. checks that llama.cpp can offload;
# 3. runs bench.fim_quality (all layers on the GPU) for the embedded default model and for
#    the tiny random-weight test model, writing one JSON per model: tokens per second,
#    parser time per token and the constrained / unconstrained wall-time ratio;
# 4. writes summary.md next to them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

n_cuts="${1:-50}"
out="${2:-bench/results/$(date +%F)-gpu-$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr -c 'A-Za-z0-9\n' '-' | tr 'A-Z' 'a-z')}"
mkdir -p "$out"

version="$(python3 -c 'import llama_cpp; print(llama_cpp.__version__)')"
if ! python3 -c 'import llama_cpp, sys; sys.exit(0 if llama_cpp.llama_supports_gpu_offload() else 1)'; then
    echo "building llama-cpp-python $version with CUDA (several minutes)..."
    CMAKE_ARGS="-DGGML_CUDA=on -DLLAVA_BUILD=OFF" python3 -m pip install --force-reinstall \
        --no-deps --no-cache-dir "llama-cpp-python==$version"
fi
python3 -c 'import llama_cpp, sys; ok = llama_cpp.llama_supports_gpu_offload(); print("GPU offload:", ok); sys.exit(0 if ok else 1)'
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$out/gpu.csv"

tiny="$out/tiny-starcoder.gguf"
python3 -m testmodels.tiny build "$tiny" >/dev/null

for model in default "$tiny"; do
    name="$([ "$model" = default ] && echo default || echo tiny)"
    echo "== $name"
    python3 -m bench.fim_quality --model "$model" --n "$n_cuts" --max-tokens 32 \
        --threads 4 --json --no-progress > "$out/quality-$name.json"
done

python3 - "$out" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
rows = ["| model | cuts | tokens/s constrained | tokens/s unconstrained | parser µs/token median | p99 | wall ratio |",
        "| --- | --- | --- | --- | --- | --- | --- |"]
for name in ("default", "tiny"):
    q = json.loads((out / f"quality-{name}.json").read_text())
    rows.append(f"| {name} | {q['cases']} | {q['constrained']['tokens_per_s']} | "
                f"{q['unconstrained']['tokens_per_s']} | {q['parser_us_per_token_median']} | "
                f"{q['parser_us_per_token_p99']} | {q['wall_ratio_constrained_over_unconstrained']} |")
(out / "summary.md").write_text("\n".join(rows) + "\n")
print("\n".join(rows))
PY
