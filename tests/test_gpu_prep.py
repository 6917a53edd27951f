"""What the GPU run (issue 32) is prepared with, checked on the CPU.

The random-weight models of ``bench.gpu.models`` load in llama.cpp with Qwen2.5-Coder's
real tokenizer and shapes; ``bench.gpu.pack`` keeps what the build reads and drops the
rest; a recording of real middles replays through the decoding loop to the same
middles.  The tokenizer comes from the real Qwen2.5-Coder 0.5B (skipped without it).
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.gpu import middles, models, pack, parser_replay
from lsp_server.decoding import DecodeOptions, build_prompt, generate
from lsp_server.model import FimModel, ModelError, gguf


@pytest.fixture(scope="module")
def qwen_gguf() -> Path:
    try:
        return pack.qwen_gguf()
    except ModelError as exc:
        pytest.skip(f"qwen2.5-coder-0.5b is not installed: {exc}")


@pytest.fixture(scope="module")
def tokenizer(qwen_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tok") / pack.TOKENIZER_FILE
    about = pack.extract_tokenizer(qwen_gguf, out)
    assert about["pre"] == "qwen2" and about["tokens"] == 151936
    return out


@pytest.fixture(scope="module")
def tiny(tokenizer: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FimModel]:
    path = models.build_model("tiny", tmp_path_factory.mktemp("m") / "tiny.gguf", "q8_0", tokenizer)
    with FimModel(path, n_ctx=1024, n_threads=1, n_gpu_layers=0) as model:
        yield model


def test_the_shapes_are_the_real_models(qwen_gguf: Path) -> None:
    meta = gguf.read_metadata(qwen_gguf)
    shape = models.SHAPES["0.5b"]
    assert meta["qwen2.block_count"][2] == shape.n_layer
    assert meta["qwen2.embedding_length"][2] == shape.n_embd
    assert meta["qwen2.feed_forward_length"][2] == shape.n_ff
    assert meta["qwen2.attention.head_count"][2] == shape.n_head
    assert meta["qwen2.attention.head_count_kv"][2] == shape.n_head_kv
    assert meta["qwen2.context_length"][2] == shape.n_ctx_train
    assert meta["qwen2.rope.freq_base"][2] == shape.rope_theta
    assert len(meta["tokenizer.ggml.tokens"][2]) == shape.n_vocab
    # 7B: 8 GB in Q8_0, as the payload's budget on the device assumes
    assert 7.5 < models.model_bytes(models.SHAPES["7b"], "q8_0") / 2**30 < 8.5


def test_the_tiny_shape_loads_as_qwen_and_completes(
    tiny: FimModel, qwen_gguf: Path, tokenizer: Path
) -> None:
    assert tiny.detected()["family"] == "qwen"
    assert tiny.layout.order == "psm"
    with FimModel(qwen_gguf, n_ctx=256, n_threads=1, n_gpu_layers=0) as real:
        assert tiny.vocab_bytes == real.vocab_bytes
        assert sorted(tiny.eog_ids) == sorted(real.eog_ids)
    left, right = "def add(a, b):\n    return a", "\n\nprint(add(1, 2))\n"
    options = DecodeOptions(mode="constrained", max_tokens=6)
    prompt, _ = build_prompt(tiny, left, right, options)
    entries = {e.key: e for e in pack.read_tokenizer_entries(tokenizer)}
    ids = {t: i for i, t in enumerate(entries["tokenizer.ggml.tokens"].value())}
    pre, suf, mid = ids["<|fim_prefix|>"], ids["<|fim_suffix|>"], ids["<|fim_middle|>"]
    assert prompt[0] == pre and prompt[-1] == mid and suf in prompt
    done = generate(tiny, left, right, options)
    assert done.tokens > 0
    assert done.complete is not False or done.stop_reason is not None


def _tarball(path: Path, names: list[str]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name in names:
            data = name.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_the_trimmed_sdist_keeps_what_the_build_reads(tmp_path: Path) -> None:
    top = "llama_cpp_python-9.9.9/"
    vendor = top + "vendor/llama.cpp/"
    kept = [
        top + "pyproject.toml",
        top + "CMakeLists.txt",
        top + "llama_cpp/__init__.py",
        vendor + "CMakeLists.txt",
        vendor + "ggml/src/ggml-cuda/mmq.cu",
        vendor + "ggml/src/ggml-cpu/ggml-cpu.c",
        vendor + "vendor/miniaudio/miniaudio.h",
        vendor + "tools/mtmd/CMakeLists.txt",
        vendor + "common/common.cpp",
    ]
    dropped = [
        top + ".git/HEAD",
        top + "tests/test_llama.py",
        top + "docs/index.md",
        top + "examples/hello.py",
        vendor + "models/ggml-vocab-qwen2.gguf",
        vendor + "docs/build.md",
        vendor + "tests/test-backend-ops.cpp",
        vendor + "benches/bench.cpp",
        vendor + "examples/simple/simple.cpp",
        vendor + "media/logo.png",
        vendor + "gguf-py/gguf/gguf.py",
        vendor + "tools/ui/index.html",
        vendor + "ggml/src/ggml-vulkan/ggml-vulkan.cpp",
    ]
    sdist, out = tmp_path / "s.tar.gz", tmp_path / "s.tar.xz"
    _tarball(sdist, kept + dropped)
    counts = pack.trim_sdist(sdist, out)
    with tarfile.open(out) as tar:
        names = sorted(m.name for m in tar if m.isfile())
    assert names == sorted(kept)
    assert counts["files"] == len(kept) and counts["dropped_files"] == len(dropped)


SOURCE = """import os


def walk(top):
    for root, dirs, files in os.walk(top):
        for name in files:
            yield os.path.join(root, name)


class Counter:
    def __init__(self):
        self.count = 0

    def add(self, n):
        self.count += n
        return self.count
"""


def test_recorded_middles_replay_to_the_same_middles(tiny: FimModel, tmp_path: Path) -> None:
    cuts = []
    for start, end in (
        (SOURCE.index("os.walk"), SOURCE.index(":\n        for")),
        (SOURCE.index("self.count +="), SOURCE.index("\n        return")),
    ):
        cut, _ = middles.record_cut(tiny, SOURCE, (start, end), max_tokens=12)
        cuts.append(cut)
    path = tmp_path / "m.json.xz"
    middles.save_recording(path, cuts, {"model_file": "tiny"})
    about, loaded = middles.load_recording(path)
    assert about["model_file"] == "tiny" and len(loaded) == 2
    report = parser_replay.replay(tiny, loaded)
    assert report["same_middle"] == 2, report["per_cut"]
    # Every step took the recorded token.  (Steering's searches have time caps: under
    # load a replay may ask a question more or fewer than the recording answers.)
    assert all(c["divergence"]["other_tokens"] == 0 for c in report["per_cut"]), report
    assert report["tokens"] == sum(len(c.parser_us) for c in cuts) > 0
    assert report["parser_us_per_token_median"] > 0


def test_a_replay_with_other_answers_says_it_diverged(tiny: FimModel) -> None:
    cut, _ = middles.record_cut(
        tiny, SOURCE, (SOURCE.index("os.walk"), SOURCE.index(":\n        for")), max_tokens=8
    )
    step = cut.generations[0][0]
    step["best"] = {k: list(reversed(v)) for k, v in step["best"].items()}
    report = parser_replay.replay(tiny, [cut])
    assert report["diverged_cuts"] == 1
