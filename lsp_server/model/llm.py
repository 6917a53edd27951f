"""Fill-in-the-middle language model on llama.cpp's low-level API.

The constrained decoder needs three things the high-level ``llama_cpp.Llama`` gets wrong or
makes slow: FIM prompts built from the model's own FIM tokens (``create_completion(suffix=)``
sends token 0 instead), the bytes of every token (``Llama.detokenize`` drops tokens longer
than 32 bytes), and the logits of the last position after each step without ``logits_all``
or state save/load. ``FimModel`` keeps the tokens held in the KV cache and only decodes what
follows their common prefix with the next prompt, so a keystroke costs the changed tail.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import threading
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from .errors import Interrupted, ModelError

__all__ = ["INTERRUPTIBLE_CHUNK", "FimLayout", "FimModel", "FimTokens", "ModelError"]

#: Prompt tokens decoded between two polls of an ``interrupt`` callback: about a third of a
#: second for a 270M model on one CPU core, and large enough to keep batching efficient.
INTERRUPTIBLE_CHUNK = 64

log = logging.getLogger(__name__)
_native_log = logging.getLogger(__name__ + ".llama_cpp")

FloatArray = npt.NDArray[np.float32]

_lib_lock = threading.Lock()
_lib_module: ModuleType | None = None
_log_callback: Any = None  # the ctypes callback must outlive every call into llama.cpp
_recent_log: deque[tuple[int, int, str]] = deque(maxlen=64)  # (serial, level, line)
_log_serial = 0
_last_level = 1

# ggml_log_level: 0 none, 1 debug, 2 info, 3 warn, 4 error, 5 continue-previous. Demoted
# one step: llama.cpp warns about many harmless model quirks, and real errors become
# ModelError messages anyway.
_LEVELS = {0: logging.DEBUG, 1: logging.DEBUG, 2: logging.DEBUG, 3: logging.INFO,
           4: logging.WARNING}  # fmt: skip


def _on_native_log(level: int, text: bytes | None, _user: Any) -> None:
    """Route llama.cpp's stderr chatter to logging and keep recent lines for error messages."""
    global _last_level, _log_serial
    if level == 5:
        level = _last_level
    _last_level = level
    line = (text or b"").decode("utf-8", errors="replace").rstrip("\n")
    if line:
        _log_serial += 1
        _recent_log.append((_log_serial, level, line))
        _native_log.log(_LEVELS.get(level, logging.DEBUG), "%s", line)


def _lib() -> ModuleType:
    """Import llama_cpp once, after setting the OpenMP wait policy.

    libgomp reads ``OMP_WAIT_POLICY`` when the shared library loads; busy-waiting worker
    threads make decoding collapse on a loaded 2-core machine, hence PASSIVE by default.
    """
    global _lib_module, _log_callback
    with _lib_lock:
        if _lib_module is None:
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            try:
                import llama_cpp
            except ImportError as exc:  # pragma: no cover - depends on the install
                raise ModelError(
                    "llama-cpp-python is not installed: pip install 'llama-cpp-python>=0.3.16'"
                ) from exc
            _log_callback = llama_cpp.llama_log_callback(_on_native_log)
            llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))
            llama_cpp.llama_backend_init()
            _lib_module = llama_cpp
        return _lib_module


def _native_errors(since: int = 0) -> str:
    """The warning/error lines llama.cpp logged after serial ``since``, for ModelError."""
    lines = [text for serial, level, text in list(_recent_log) if serial > since and level >= 3]
    return "; ".join(lines[-3:])


@dataclass(frozen=True)
class FimTokens:
    """Special token ids of a model; None where the vocabulary has no such token."""

    pre: int | None
    suf: int | None
    mid: int | None
    pad: int | None
    rep: int | None
    sep: int | None
    eot: int | None
    eos: int | None
    bos: int | None


@dataclass(frozen=True)
class FimLayout:
    """How a FIM prompt is laid out for one model family.

    ``order`` is "psm" (pre prefix suf suffix mid), "spm" (suf suffix pre prefix mid: the
    opt-in ``spm_infill`` layout of llama.cpp's server, whose suffix-first order keeps the
    KV cache across keystrokes), "sp" (Codestral: suf suffix pre prefix, no middle token) or
    "none" (no FIM tokens: the prompt is the prefix alone). ``suffix_no_space`` tokenizes the
    suffix without SentencePiece's dummy leading space, as CodeLlama's and Mistral's reference
    code do (``encode_infilling``).
    """

    family: str
    order: Literal["psm", "spm", "sp", "none"]
    add_bos: bool
    suffix_no_space: bool = False


# FIM_PRE token text -> family, checked against what llama.cpp detected (llama-vocab.cpp).
_FAMILIES: dict[str, str] = {
    "<fim_prefix>": "starcoder",  # StarCoder, StarCoder2, SantaCoder, Refact, Granite
    "<|fim_prefix|>": "qwen",  # Qwen2.5-Coder, Qwen3-Coder
    "<｜fim▁begin｜>": "deepseek",  # DeepSeek-Coder (V1 and V2)
    "<PRE>": "codellama",
    "▁<PRE>": "codellama",
    "[PREFIX]": "codestral",  # Mistral's [SUFFIX]suffix[PREFIX]prefix; llama.cpp misses it
}
# Texts llama.cpp does not look for but these families use (StarCoder2 names repo/file
# separators differently from Qwen; CodeLlama's end-of-infill token carries a "▁").
_EXTRA_TEXTS: dict[str, tuple[str, ...]] = {
    "pre": ("[PREFIX]",),
    "suf": ("[SUFFIX]",),
    "mid": ("[MIDDLE]",),
    "rep": ("<repo_name>", "<|repo_name|>", "<reponame>"),
    "sep": ("<file_sep>", "<|file_sep|>"),
    "eot": ("<EOT>", "▁<EOT>", "<|EOT|>"),
}


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class FimModel:
    """A GGUF model loaded through llama.cpp, driven one sequence at a time.

    Not thread-safe: one caller at a time (the LSP's single decode worker). Free the native
    memory with ``close()`` or a ``with`` block; it is also released on garbage collection.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        n_ctx: int = 4096,
        n_threads: int = 1,
        n_batch: int = 512,
        n_gpu_layers: int | None = None,
        seed: int = 0,
        use_mmap: bool = True,
        flash_attn: bool | None = None,
        suffix_share: float = 0.25,
        align_lines: int = 1,
        spm_infill: bool = False,
    ) -> None:
        if not 0.0 <= suffix_share <= 1.0:
            raise ValueError("suffix_share must be between 0 and 1")
        self.suffix_share = suffix_share
        self.align_lines = max(1, align_lines)
        self.spm_infill = spm_infill
        self._model: Any = None
        self._ctx: Any = None
        self._batch: Any = None
        self.path = Path(path)
        self._check_file(self.path)
        lib = self._lib = _lib()

        if n_gpu_layers is None:
            n_gpu_layers = -1 if lib.llama_supports_gpu_offload() else 0
        mparams = lib.llama_model_default_params()
        mparams.n_gpu_layers = n_gpu_layers
        mparams.use_mmap = use_mmap
        mark = _log_serial
        model = lib.llama_model_load_from_file(os.fsencode(self.path), mparams)
        if not model:
            detail = _native_errors(mark) or "no detail from llama.cpp"
            raise ModelError(f"cannot load model {self.path}: corrupt or unsupported ({detail})")
        self._model = model

        n_batch = max(1, n_batch)
        cparams = lib.llama_context_default_params()
        cparams.n_ctx = max(0, n_ctx)
        cparams.n_batch = n_batch
        cparams.n_ubatch = n_batch
        cparams.n_seq_max = 1
        cparams.n_threads = max(1, n_threads)
        cparams.n_threads_batch = max(1, n_threads)
        # CPU flash attention makes logits depend on how the prompt was split into batches
        # (~1e-3), so a completion would depend on the editing history that shaped the KV
        # cache; without it reuse is bit-exact. Default: off on CPU, llama.cpp's choice on GPU.
        if flash_attn is None:
            flash_attn = None if n_gpu_layers != 0 else False
        if hasattr(cparams, "flash_attn_type"):
            cparams.flash_attn_type = -1 if flash_attn is None else int(flash_attn)
        elif flash_attn is not None:  # pragma: no cover - older llama-cpp-python
            cparams.flash_attn = flash_attn
        if hasattr(cparams, "swa_full"):
            cparams.swa_full = True  # keep sliding-window layers' cache whole: prefix reuse
        ctx = lib.llama_init_from_model(model, cparams)
        if not ctx:
            self.close()
            detail = _native_errors(mark) or "out of memory?"
            raise ModelError(f"cannot create a context for {self.path} (n_ctx={n_ctx}: {detail})")
        self._ctx = ctx
        self._mem = lib.llama_get_memory(ctx) if hasattr(lib, "llama_get_memory") else None
        n_batch = min(n_batch, lib.llama_n_batch(ctx))  # llama.cpp caps it at n_ctx
        self._batch = lib.llama_batch_init(n_batch, 0, 1)

        self.vocab = lib.llama_model_get_vocab(model)
        self.n_vocab: int = lib.llama_vocab_n_tokens(self.vocab)
        if self.n_vocab <= 0:
            self.close()
            raise ModelError(f"{self.path} has no vocabulary")
        self.n_ctx: int = lib.llama_n_ctx(ctx)
        self.n_batch = n_batch
        self.n_threads = max(1, n_threads)
        self.n_gpu_layers = n_gpu_layers
        self.seed = seed
        self.rng = np.random.default_rng(seed)  # for samplers built on top of this class

        self._tokens: list[int] = []  # what sequence 0 of the KV cache holds, in order
        self._last_logits: FloatArray | None = None
        self.n_decoded = 0  # tokens sent to llama_decode so far (tests and stats)
        self.n_decode_calls = 0

        self._piece_buf = ctypes.create_string_buffer(256)
        self._token_bytes: list[bytes] = [self._piece(i) for i in range(self.n_vocab)]
        self._eog_ids: tuple[int, ...] | None = None
        # Whether tokenize() prepends SentencePiece's dummy space (llama, CodeLlama, ...).
        self._space_prefix = self.detokenize(self.tokenize("a")) == b" a"
        self.fim_tokens = self._find_fim_tokens()
        self.layout = self._find_layout()
        self._stop_ids = frozenset(
            t
            for t in (*self._fim_markers(), self.fim_tokens.eot, self.fim_tokens.eos)
            if t is not None
        )

    # ------------------------------------------------------------ lifecycle

    @staticmethod
    def _check_file(path: Path) -> None:
        """Turn the usual file problems into clear errors before llama.cpp sees the path."""
        if not path.exists():
            raise ModelError(f"model file not found: {path}")
        if not path.is_file():
            raise ModelError(f"model path is not a file: {path}")
        try:
            with path.open("rb") as f:
                magic = f.read(4)
        except OSError as exc:
            raise ModelError(f"cannot read model file {path}: {exc.strerror or exc}") from exc
        if magic != b"GGUF":
            raise ModelError(f"{path} is not a GGUF model file (bad magic {magic!r})")

    def close(self) -> None:
        """Free the context, model and batch; the object is unusable afterwards."""
        lib = getattr(self, "_lib", None)
        if lib is None:
            return
        if self._batch is not None:
            lib.llama_batch_free(self._batch)
            self._batch = None
        if self._ctx is not None:
            lib.llama_free(self._ctx)
            self._ctx = None
        if self._model is not None:
            lib.llama_model_free(self._model)
            self._model = None

    def __enter__(self) -> FimModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # at interpreter exit modules may be gone
            self.close()

    def _require_open(self) -> None:
        if self._ctx is None:
            raise ModelError("model is closed")

    # ------------------------------------------------------------ vocabulary

    def _piece(self, token: int) -> bytes:
        """Bytes of one token; control tokens render as b"" (special=False)."""
        buf = self._piece_buf
        n = self._lib.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, False)
        if n < 0:  # longer than the buffer: llama.cpp returns minus the size it needs
            big = ctypes.create_string_buffer(-n)
            n = self._lib.llama_token_to_piece(self.vocab, token, big, -n, 0, False)
            return big.raw[:n]
        return buf.raw[:n]

    def token_bytes(self, token: int) -> bytes:
        """The bytes a token stands for (b"" for control tokens such as FIM markers)."""
        return self._token_bytes[token]

    @property
    def vocab_bytes(self) -> list[bytes]:
        """Bytes of every token id, indexed by id (shared list: do not modify)."""
        return self._token_bytes

    def token_text(self, token: int) -> str:
        """The token's raw vocabulary text (e.g. "Ġdef", "<fim_prefix>"), for diagnostics."""
        if not 0 <= token < self.n_vocab:  # llama.cpp would abort on a bad id
            raise ValueError(f"token id {token} out of range (n_vocab={self.n_vocab})")
        raw: bytes = self._lib.llama_vocab_get_text(self.vocab, token) or b""
        return raw.decode("utf-8", errors="replace")

    def detokenize(self, tokens: Sequence[int]) -> bytes:
        """Concatenated token bytes; may end inside a UTF-8 sequence."""
        table = self._token_bytes
        return b"".join(table[t] for t in tokens)

    def tokenize(
        self, text: str, add_special: bool = False, parse_special: bool = False
    ) -> list[int]:
        """Tokenize text; ``add_special`` adds BOS/EOS as the model wants, ``parse_special``
        turns special-token texts such as "<fim_prefix>" into their ids."""
        self._require_open()
        data = text.encode("utf-8", errors="replace")
        cap = len(data) + 16
        while True:
            out = (self._lib.llama_token * cap)()
            n = self._lib.llama_tokenize(self.vocab, data, len(data), out, cap, add_special,
                                         parse_special)  # fmt: skip
            if n >= 0:
                return list(out[:n])
            if -n <= cap:  # pragma: no cover - defensive against an API change
                raise ModelError(f"tokenization failed ({n})")
            cap = -n

    def _special_id(self, text: str) -> int | None:
        """Id of the special token whose text is exactly ``text``, if the vocabulary has one."""
        toks = self.tokenize(text, parse_special=True)
        if len(toks) == 1 and self.token_text(toks[0]) == text:
            return toks[0]
        return None

    def _find_fim_tokens(self) -> FimTokens:
        lib, vocab = self._lib, self.vocab

        def tid(func: str) -> int | None:
            fn: Callable[[Any], int] | None = getattr(lib, func, None)
            value = fn(vocab) if fn is not None else -1
            return value if 0 <= value < self.n_vocab else None

        found = {k: tid(f"llama_vocab_fim_{k}") for k in ("pre", "suf", "mid", "pad", "rep",
                                                           "sep")}  # fmt: skip
        found["eot"] = tid("llama_vocab_eot")
        for kind, texts in _EXTRA_TEXTS.items():
            if found[kind] is None:
                found[kind] = next((i for t in texts if (i := self._special_id(t)) is not None),
                                   None)  # fmt: skip
        return FimTokens(eos=tid("llama_vocab_eos"), bos=tid("llama_vocab_bos"), **found)

    def _find_layout(self) -> FimLayout:
        ft = self.fim_tokens
        add_bos = bool(self._lib.llama_vocab_get_add_bos(self.vocab)) and ft.bos is not None
        if ft.pre is None or ft.suf is None:
            return FimLayout("none", "none", add_bos)
        family = _FAMILIES.get(self.token_text(ft.pre), "generic")
        if family == "codestral":
            return FimLayout(family, "sp", add_bos, suffix_no_space=True)
        if ft.mid is None:
            return FimLayout("none", "none", add_bos)
        order: Literal["psm", "spm"] = "spm" if self.spm_infill else "psm"
        return FimLayout(family, order, add_bos, suffix_no_space=family == "codellama")

    def _fim_markers(self) -> tuple[int | None, ...]:
        ft = self.fim_tokens
        return (ft.pre, ft.suf, ft.mid, ft.pad, ft.rep, ft.sep)

    @property
    def has_fim(self) -> bool:
        """True when prompts carry the suffix (the model has usable FIM tokens)."""
        return self.layout.order != "none"

    @property
    def eog_ids(self) -> tuple[int, ...]:
        """Every id that ends generation (computed once: the decoder sums their probability)."""
        if self._eog_ids is None:
            self._eog_ids = tuple(t for t in range(self.n_vocab) if self.eog(t))
        return self._eog_ids

    def eog(self, token: int) -> bool:
        """Whether generation should stop at ``token``: llama.cpp's end-of-generation set
        plus EOS/EOT and the FIM markers, which a FIM model emits only when it is done."""
        return token in self._stop_ids or bool(self._lib.llama_vocab_is_eog(self.vocab, token))

    # ------------------------------------------------------------ prompts

    def _tokenize_infill(self, text: str) -> list[int]:
        """Tokenize without the dummy leading space (CodeLlama's ``encode_infilling``)."""
        if not text or not self._space_prefix:
            return self.tokenize(text)
        want = text.encode("utf-8", errors="replace")
        toks = self.tokenize("\n" + text)
        acc = b""
        for k, t in enumerate(toks):
            acc += self._token_bytes[t]
            if acc in (b"\n", b" \n"):
                rest = toks[k + 1 :]
                if self.detokenize(rest) == want:
                    return rest
                break
            if len(acc) >= 2:
                break
        toks = self.tokenize(text)
        if toks and self._token_bytes[toks[0]] == b" ":
            return toks[1:]
        return toks

    def _tokenize_prefix(self, text: str) -> list[int]:
        return self.tokenize(text) if text else []

    def _tokenize_suffix(self, text: str) -> list[int]:
        if not text:
            return []
        return self._tokenize_infill(text) if self.layout.suffix_no_space else self.tokenize(text)

    def _assemble(self, prefix: list[int], suffix: list[int]) -> list[int]:
        lay, ft = self.layout, self.fim_tokens
        out: list[int] = [ft.bos] if lay.add_bos and ft.bos is not None else []
        pre, suf, mid = ft.pre, ft.suf, ft.mid
        if lay.order == "none" or pre is None or suf is None:
            return out + prefix
        if lay.order == "sp":
            return [*out, suf, *suffix, pre, *prefix]
        assert mid is not None
        if lay.order == "spm":
            return [*out, suf, *suffix, pre, *prefix, mid]
        return [*out, pre, *prefix, suf, *suffix, mid]

    def prompt_budget(self, max_new_tokens: int = 128, margin: int = 8) -> int:
        """Tokens of prefix plus suffix a prompt may hold, leaving room to generate."""
        overhead = len(self._assemble([], []))
        return self.n_ctx - max_new_tokens - margin - overhead

    def fit_context(
        self, prefix: str, suffix: str, max_new_tokens: int = 128, margin: int = 8
    ) -> tuple[str, str]:
        """Cut ``prefix``'s head and ``suffix``'s tail to fit the context window.

        Cuts fall on line boundaries so the model sees whole lines, keeping the text nearest
        the cursor. The budget is split ``1 - suffix_share`` prefix (3/4 by default) to
        ``suffix_share`` suffix, and whatever one side does not need goes to the other. A
        model without FIM gets the whole budget for the prefix.

        With ``align_lines`` > 1 the prefix is cut only at line numbers (counted from the
        start of ``prefix``) that are multiples of it, so the cut, and with it the KV cache,
        stays put while the user types: otherwise each line the window slides by forces a
        full re-evaluation.
        """
        budget = self.prompt_budget(max_new_tokens, margin)
        if budget <= 0:
            raise ModelError(
                f"context of {self.n_ctx} tokens leaves no room for a prompt with "
                f"max_new_tokens={max_new_tokens}"
            )
        if not self.has_fim:
            return self._keep_tail(prefix, budget), ""
        p_toks = self._tokenize_prefix(prefix)
        s_toks = self._tokenize_suffix(suffix)
        if len(p_toks) + len(s_toks) <= budget:
            return prefix, suffix
        s_budget = int(budget * self.suffix_share)
        p_budget = budget - s_budget
        if len(p_toks) < p_budget:
            s_budget += p_budget - len(p_toks)
            p_budget = len(p_toks)
        elif len(s_toks) < s_budget:
            p_budget += s_budget - len(s_toks)
            s_budget = len(s_toks)
        return (
            self._keep_tail(prefix, p_budget, p_toks),
            self._keep_head(suffix, s_budget, s_toks),
        )

    def _token_ends(self, toks: list[int], data: bytes) -> list[int]:
        """Byte offset in ``data`` where each token ends.

        Exact when the token bytes spell ``data``; a SentencePiece dummy space is discounted;
        otherwise (normalising tokenizers) an estimate that the callers verify.
        """
        ends: list[int] = []
        pos = len(data) - len(self.detokenize(toks))  # -1 with a dummy leading space
        for t in toks:
            pos += len(self._token_bytes[t])
            ends.append(min(max(pos, 0), len(data)))
        return ends

    def _keep_tail(self, text: str, budget: int, toks: list[int] | None = None) -> str:
        """Longest tail of ``text`` starting at a line start that takes <= budget tokens."""
        if budget <= 0 or not text:
            return ""
        toks = self._tokenize_prefix(text) if toks is None else toks
        if len(toks) <= budget:
            return text
        data = text.encode("utf-8", errors="replace")
        starts = [0, *self._token_ends(toks, data)[:-1]]
        line_starts = [i + 1 for i in range(len(data) - 1) if data[i] == 0x0A]
        for align in dict.fromkeys((self.align_lines, 1)):
            for line, at in enumerate(line_starts, start=1):
                if line % align or len(toks) - bisect_left(starts, at) > budget:
                    continue  # not aligned, or estimated too long: try the next line start
                candidate = data[at:].decode("utf-8", errors="replace")
                if len(self._tokenize_prefix(candidate)) <= budget:
                    return candidate
        # the cursor's own line is too long: keep its last tokens
        for keep in range(budget, 0, -1):
            candidate = data[starts[-keep] :].decode("utf-8", errors="ignore")
            if len(self._tokenize_prefix(candidate)) <= budget:
                return candidate
        return ""

    def _keep_head(self, text: str, budget: int, toks: list[int] | None = None) -> str:
        """Longest head of ``text`` ending at a line end that takes <= budget tokens."""
        if budget <= 0 or not text:
            return ""
        toks = self._tokenize_suffix(text) if toks is None else toks
        if len(toks) <= budget:
            return text
        data = text.encode("utf-8", errors="replace")
        ends = self._token_ends(toks, data)
        for at in (i + 1 for i in range(len(data) - 1, -1, -1) if data[i] == 0x0A):
            if bisect_right(ends, at) > budget:
                continue  # estimate says too long: try the previous line end
            candidate = data[:at].decode("utf-8", errors="replace")
            if len(self._tokenize_suffix(candidate)) <= budget:
                return candidate
        for keep in range(budget, 0, -1):
            candidate = data[: ends[keep - 1]].decode("utf-8", errors="ignore")
            if len(self._tokenize_suffix(candidate)) <= budget:
                return candidate
        return ""

    def build_fim_prompt(
        self, prefix: str, suffix: str, max_new_tokens: int = 128, margin: int = 8
    ) -> list[int]:
        """Token ids of the FIM prompt for text around the cursor, cut to fit the context.

        PSM families (StarCoder, Qwen, DeepSeek, CodeLlama, generic): ``[BOS] <pre> prefix
        <suf> suffix <mid>``; Codestral: ``[BOS] [SUFFIX] suffix [PREFIX] prefix``; a model
        without FIM tokens: ``[BOS] prefix``. BOS only where the vocabulary asks for it.
        """
        prefix, suffix = self.fit_context(prefix, suffix, max_new_tokens, margin)
        return self._assemble(self._tokenize_prefix(prefix), self._tokenize_suffix(suffix))

    # ------------------------------------------------------------ evaluation

    @property
    def cached_tokens(self) -> tuple[int, ...]:
        """Tokens currently held in the KV cache (sequence 0)."""
        return tuple(self._tokens)

    def reset(self) -> None:
        """Forget the KV cache."""
        self._require_open()
        self._clear_memory()

    def _clear_memory(self) -> None:
        lib = self._lib
        if self._mem is not None:
            lib.llama_memory_clear(self._mem, True)
        else:  # pragma: no cover - llama-cpp-python < 0.3.16
            lib.llama_kv_self_clear(self._ctx)
        self._tokens = []
        self._last_logits = None

    def _truncate(self, n: int) -> int:
        """Drop cached tokens from position ``n`` on; return how many are really kept.

        Recurrent models cannot drop a partial sequence and sliding-window caches may have
        evicted early positions: then the whole cache goes and everything is re-decoded.
        """
        if n >= len(self._tokens):
            return len(self._tokens)
        lib = self._lib
        if self._mem is not None:
            ok = bool(lib.llama_memory_seq_rm(self._mem, 0, n, -1))
            if ok and n > 0 and lib.llama_memory_seq_pos_min(self._mem, 0) > 0:
                ok = False
        else:  # pragma: no cover - llama-cpp-python < 0.3.16
            ok = bool(lib.llama_kv_self_seq_rm(self._ctx, 0, n, -1))
        if not ok:
            self._clear_memory()
            return 0
        del self._tokens[n:]
        self._last_logits = None
        return n

    def _decode(
        self,
        tokens: Sequence[int],
        interrupt: Callable[[], bool] | None = None,
        chunk_size: int | None = None,
    ) -> FloatArray:
        """Decode ``tokens`` after the cached ones in chunks; logits of the last.

        ``interrupt`` is polled before each chunk; when it says so, ``Interrupted`` is
        raised and the chunks decoded so far stay in the cache.
        """
        lib, batch = self._lib, self._batch
        if len(self._tokens) + len(tokens) > self.n_ctx:
            raise ModelError(
                f"{len(self._tokens) + len(tokens)} tokens exceed the context of {self.n_ctx}"
            )
        size = self.n_batch if chunk_size is None else max(1, min(chunk_size, self.n_batch))
        for start in range(0, len(tokens), size):
            if interrupt is not None and interrupt():
                raise Interrupted(f"stopped after {start} of {len(tokens)} prompt tokens")
            chunk = tokens[start : start + size]
            last_chunk = start + size >= len(tokens)
            base = len(self._tokens)
            for i, tok in enumerate(chunk):
                if not 0 <= tok < self.n_vocab:
                    raise ModelError(f"token id {tok} out of range (n_vocab={self.n_vocab})")
                batch.token[i] = tok
                batch.pos[i] = base + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = 0
            if last_chunk:
                batch.logits[len(chunk) - 1] = 1
            batch.n_tokens = len(chunk)
            mark = _log_serial
            rc = lib.llama_decode(self._ctx, batch)
            self.n_decode_calls += 1
            if rc != 0:
                self._clear_memory()  # partial ubatches may remain: start over next time
                detail = _native_errors(mark)
                raise ModelError(f"llama_decode failed with code {rc}: {detail}")
            self._tokens.extend(chunk)
            self.n_decoded += len(chunk)
        ptr = lib.llama_get_logits_ith(self._ctx, -1)
        if not ptr:
            raise ModelError("llama.cpp returned no logits")
        logits: FloatArray = np.array(np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)))
        self._last_logits = logits
        return logits

    def evaluate(
        self, tokens: Sequence[int], interrupt: Callable[[], bool] | None = None
    ) -> FloatArray:
        """Logits (float32, n_vocab) after ``tokens``, decoding only what the cache lacks.

        The returned array is a copy the caller owns.  With ``interrupt``, the prompt is
        decoded in chunks of ``INTERRUPTIBLE_CHUNK`` tokens and ``interrupt`` is polled
        between them (a long prompt takes seconds on a CPU): ``Interrupted`` is raised
        when it returns true, and what was decoded stays cached for the next call.
        """
        self._require_open()
        tokens = list(tokens)
        if not tokens:
            raise ValueError("evaluate() needs at least one token")
        if len(tokens) > self.n_ctx:
            raise ModelError(f"{len(tokens)} tokens exceed the context of {self.n_ctx}")
        n = _common_prefix(self._tokens, tokens)
        if n == len(tokens) == len(self._tokens) and self._last_logits is not None:
            logits = self._last_logits
        else:
            if n == len(tokens):
                n -= 1  # the cache holds the last token but not its logits: decode it again
            n = self._truncate(n)
            chunk = None if interrupt is None else INTERRUPTIBLE_CHUNK
            logits = self._decode(tokens[n:], interrupt, chunk)
        out: FloatArray = logits.copy()
        return out

    def append(self, token: int) -> FloatArray:
        """Decode one more token after the cached ones (a generation step); its logits."""
        self._require_open()
        out: FloatArray = self._decode([token]).copy()
        return out

    def truncate(self, n: int) -> None:
        """Keep only the first ``n`` cached tokens (e.g. to back out of a rejected draft)."""
        self._require_open()
        self._truncate(max(0, n))
