"""A client for one inference server: llama-server's native API or OpenAI's completions.

``ServerClient`` is what the remote backend calls.  Prompts always go as token ids, so
FIM control tokens can never be confused with text; generation is greedy (temperature
0, fixed seed) so that a server and the in-process model give the same tokens for the
same weights.  Every call takes ``cancel`` (polled) and ``deadline``
(``time.perf_counter()`` seconds) and returns within ``http.POLL_S`` of either firing,
closing the connection so the server stops working on it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from lsp_server.modes import SERVER_APIS, ServerApi

from .completions import (
    Completion,
    CompletionEnd,
    Step,
    TokenResolver,
    legacy_steps,
    llama_step,
    resolve_token_id_spelling,
)
from .errors import ServerError, ServerHTTPError, ServerProtocolError
from .http import Cancel, HttpClient, Stopped
from .vocab import ServerVocab, vocab_from_server_answers

__all__ = [
    "LLAMA_CPP",
    "OPENAI",
    "SERVER_APIS",
    "CompletionStream",
    "ServerApi",
    "ServerClient",
    "incomplete_utf8_tail",
]

LLAMA_CPP = "llama.cpp"
OPENAI = "openai"

# llama.cpp's stop types, and OpenAI's finish reasons in the same words.
_FINISH = {"stop": "eos", "length": "limit", "eos": "eos", "limit": "limit", "word": "word"}


def _utf8_length(lead: int) -> int:
    """Bytes of the UTF-8 character a lead byte starts (1 for anything else)."""
    if lead & 0xE0 == 0xC0:
        return 2
    if lead & 0xF0 == 0xE0:
        return 3
    if lead & 0xF8 == 0xF0:
        return 4
    return 1


def incomplete_utf8_tail(data: bytes) -> bool:
    """Whether llama-server holds ``data`` back as ending inside a character: a lead byte
    among the last four with fewer bytes after it than its character needs (its
    ``validate_utf8``, which looks past other bytes, valid or not)."""
    return any(back < _utf8_length(data[-back]) for back in range(1, min(4, len(data)) + 1))


def _dict(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ServerProtocolError("not a JSON object")
    return value


def _int_list(value: Any) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(v, int) for v in value):
        raise ServerProtocolError("not a list of token ids")
    return value


class CompletionStream:
    """Steps as the server generates them.

    Iterate it for ``Step``s; when the iteration ends, ``end`` says why (a "cancelled" or
    "deadline" stop when the caller's flag or deadline ended it: not an error).  ``close``
    (or leaving a ``with`` block, or breaking out of a loop and dropping it) closes the
    connection at once, and the server stops generating for it.
    """

    def __init__(
        self,
        events: Iterator[Any],
        parse: Callable[[Any], tuple[list[Step], CompletionEnd | None]],
        where: str = "",
    ) -> None:
        self._events = events
        self._parse = parse
        self._where = where
        self._pending: list[Step] = []
        self.end: CompletionEnd | None = None
        self.steps_seen = 0

    @classmethod
    def ended(cls, end: CompletionEnd) -> CompletionStream:
        """A stream that ended before the server began to answer."""
        stream = cls(iter(()), lambda event: ([], None))
        stream.end = end
        return stream

    def __iter__(self) -> CompletionStream:
        return self

    def __next__(self) -> Step:
        while not self._pending:
            if self.end is not None:
                raise StopIteration
            try:
                event = next(self._events)
            except StopIteration:
                raise ServerProtocolError(
                    f"the stream from {self._where} ended without saying why generation stopped"
                ) from None
            except Stopped as stop:
                self.end = CompletionEnd(stop.reason, n_predicted=self.steps_seen)
                raise StopIteration from None
            steps, end = self._parse(event)
            self._pending.extend(steps)
            if end is not None:
                self.end = end
                self.close()
        self.steps_seen += 1
        return self._pending.pop(0)

    def close(self) -> None:
        """Stop reading and close the connection (idempotent)."""
        close = getattr(self._events, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> CompletionStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ServerClient:
    """One inference server at ``url``, spoken to in its native API or OpenAI's.

    ``server_api``: "llama.cpp" (llama-server's ``/completion``), "openai"
    (``/v1/completions``: vLLM, SGLang, TGI, llama-server, llama-cpp-python) or "auto":
    llama.cpp when ``/props`` answers like llama-server, else OpenAI when ``/v1/models``
    answers.  ``model`` names the model on servers that serve several (OpenAI's
    ``model`` field; default: the first ``/v1/models`` lists).  ``vocab`` is a local
    copy of the vocabulary (``load_local_vocab``): needed where the server cannot
    describe its own (OpenAI-only servers) and to map OpenAI's token texts to ids.
    """

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        server_api: ServerApi = "auto",
        model: str | None = None,
        vocab: ServerVocab | None = None,
        verify: bool | str = True,
        connect_timeout: float = 5.0,
        read_timeout: float = 60.0,
    ) -> None:
        if server_api not in SERVER_APIS:
            raise ValueError(
                f"serverApi must be 'auto', 'llama.cpp' or 'openai', not {server_api!r}"
            )
        self.http = HttpClient(
            url,
            api_key=api_key,
            verify=verify,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
        )
        self.requested_api = server_api
        self._api: str | None = None if server_api == "auto" else server_api
        self._model = model
        self._vocab = vocab
        self._is_llama_server: bool | None = None
        self._pieces: dict[int, bytes] = {}
        self._text_prompts = False
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return self.http.url

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> ServerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _bad(self, path: str, what: str) -> ServerProtocolError:
        return ServerProtocolError(f"unexpected answer from {self.url}{path}: {what}")

    @contextlib.contextmanager
    def _reading(self, path: str) -> Iterator[None]:
        """Name the server and endpoint in errors about the shape of an answer."""
        try:
            yield
        except ServerProtocolError as exc:
            if self.url in str(exc):
                raise
            raise self._bad(path, str(exc)) from None

    def _call(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None,
        cancel: Cancel | None,
        deadline: float | None,
    ) -> dict[str, Any]:
        """A request whose answer must be a JSON object."""
        answer = self.http.request(method, path, body, cancel=cancel, deadline=deadline)
        with self._reading(path):
            return _dict(answer)

    # ------------------------------------------------------------ discovery

    def detect(self, *, cancel: Cancel | None = None, deadline: float | None = None) -> str:
        """The API to use ("llama.cpp" or "openai"), asking the server once."""
        with self._lock:
            if self._api is not None and self._is_llama_server is not None:
                return self._api
        props = self._try_props(cancel, deadline)
        is_llama = props is not None
        api = self._api or (LLAMA_CPP if is_llama else None)
        if api is None:
            self.models(cancel=cancel, deadline=deadline)  # raises if it is no server at all
            api = OPENAI
        with self._lock:
            self._api, self._is_llama_server = api, is_llama
        return api

    def _try_props(self, cancel: Cancel | None, deadline: float | None) -> dict[str, Any] | None:
        """llama-server's ``/props``, or None where the server has no such endpoint."""
        try:
            props = self.http.request("GET", "/props", cancel=cancel, deadline=deadline)
        except ServerHTTPError as exc:
            if exc.status in (404, 405, 400):
                return None
            raise
        except ServerProtocolError:
            return None  # something else answers /props: not llama-server
        if isinstance(props, dict) and (
            "default_generation_settings" in props or "total_slots" in props
        ):
            return props
        return None

    @property
    def api(self) -> str:
        return self._api or self.detect()

    def health(self, *, cancel: Cancel | None = None, deadline: float | None = None) -> None:
        """Raise ``ServerError`` unless the server is up and its model loaded."""
        path = (
            "/health"
            if self.detect(cancel=cancel, deadline=deadline) == LLAMA_CPP
            else "/v1/models"
        )
        self.http.request("GET", path, cancel=cancel, deadline=deadline)

    def props(
        self, *, cancel: Cancel | None = None, deadline: float | None = None
    ) -> dict[str, Any]:
        """llama-server's ``/props``: model path, ``default_generation_settings`` (with the
        per-slot ``n_ctx``), ``total_slots``, ``chat_template``, ``bos_token``..."""
        return self._call("GET", "/props", None, cancel, deadline)

    def models(
        self, *, cancel: Cancel | None = None, deadline: float | None = None
    ) -> list[dict[str, Any]]:
        """``/v1/models``' entries (``id``; llama-server adds ``meta`` with ``n_vocab``,
        ``n_ctx``, ``n_ctx_train``)."""
        answer = self._call("GET", "/v1/models", None, cancel, deadline)
        data = answer.get("data")
        if not isinstance(data, list) or not data or not all(isinstance(d, dict) for d in data):
            raise self._bad("/v1/models", "no models listed")
        return data

    def model_name(self) -> str:
        """The ``model`` to name in OpenAI requests: the setting, else the first listed."""
        if self._model is None:
            model_id = self.models()[0].get("id")
            if not isinstance(model_id, str):
                raise self._bad("/v1/models", "a model without an id")
            self._model = model_id
        return self._model

    def n_ctx(self) -> int:
        """Context size of one request (llama-server: per slot)."""
        if self.api == LLAMA_CPP:
            settings = self.props().get("default_generation_settings", {})
            if isinstance(settings, dict) and isinstance(settings.get("n_ctx"), int):
                return int(settings["n_ctx"])
        for entry in self.models():
            meta = entry.get("meta") or {}
            for key in ("n_ctx", "max_model_len"):
                if isinstance(meta.get(key), int):
                    return int(meta[key])
            if isinstance(entry.get("max_model_len"), int):  # vLLM
                return int(entry["max_model_len"])
        raise ServerProtocolError(f"{self.url} does not say its context size")

    # ------------------------------------------------------------ vocabulary (llama.cpp)

    def tokenize(
        self,
        text: str,
        *,
        add_special: bool = False,
        parse_special: bool = False,
        cancel: Cancel | None = None,
        deadline: float | None = None,
    ) -> list[int]:
        """Token ids of ``text`` by the server's tokenizer (llama-server's ``/tokenize``).
        ``parse_special`` turns special-token texts such as "<fim_prefix>" into their ids."""
        body = {"content": text, "add_special": add_special, "parse_special": parse_special}
        answer = self._call("POST", "/tokenize", body, cancel, deadline)
        with self._reading("/tokenize"):
            return _int_list(answer.get("tokens"))

    def token_pieces(
        self, tokens: Sequence[int], *, cancel: Cancel | None = None, deadline: float | None = None
    ) -> list[bytes]:
        """Each token's bytes (special tokens as their text), in one ``/tokenize`` call."""
        body = {"content": list(tokens), "with_pieces": True}
        entries = self._call("POST", "/tokenize", body, cancel, deadline).get("tokens")
        if not isinstance(entries, list) or len(entries) != len(tokens):
            raise self._bad("/tokenize", "not one piece per token")
        pieces: list[bytes] = []
        for entry in entries:
            piece = entry.get("piece") if isinstance(entry, dict) else None
            if isinstance(piece, str):
                pieces.append(piece.encode("utf-8"))
            elif isinstance(piece, list) and all(isinstance(b, int) for b in piece):
                pieces.append(bytes(piece))
            else:
                raise self._bad("/tokenize", f"a piece that is not text or bytes: {piece!r}")
        return pieces

    def detokenize(
        self, tokens: Sequence[int], *, cancel: Cancel | None = None, deadline: float | None = None
    ) -> str:
        """The text of ``tokens`` (special tokens as their text; llama-server)."""
        answer = self._call("POST", "/detokenize", {"tokens": list(tokens)}, cancel, deadline)
        content = answer.get("content")
        if not isinstance(content, str):
            raise self._bad("/detokenize", "no content")
        return content

    def vocabulary(self, *, deadline: float | None = None) -> ServerVocab:
        """The model's vocabulary: the local copy if one was given, else asked of the server
        once (llama-server: every token's text in one ``/tokenize`` call)."""
        if self._vocab is not None:
            return self._vocab
        if self.detect(deadline=deadline) != LLAMA_CPP and not self._is_llama_server:
            raise ServerError(
                f"{self.url} cannot describe its vocabulary (no llama-server API): give a local "
                "copy of the model's vocabulary (a GGUF) with the modelVocab setting"
            )
        meta = self.models(deadline=deadline)[0].get("meta") or {}
        n_vocab = meta.get("n_vocab") if isinstance(meta, dict) else None
        if not isinstance(n_vocab, int) or n_vocab <= 0:
            raise self._bad("/v1/models", "no n_vocab")
        body = {"content": list(range(n_vocab)), "with_pieces": True}
        entries = self._call("POST", "/tokenize", body, None, deadline).get("tokens")
        if not isinstance(entries, list) or len(entries) != n_vocab:
            raise self._bad("/tokenize", "not one piece per id")
        pieces = [e.get("piece", "") if isinstance(e, dict) else "" for e in entries]
        vocab = vocab_from_server_answers(
            pieces,
            self.props(deadline=deadline),
            self.tokenize("a", deadline=deadline),
            self.tokenize("a", add_special=True, deadline=deadline),
        )
        self._vocab = vocab
        return vocab

    # ------------------------------------------------------------ completions

    def _body(
        self,
        prompt: Sequence[int],
        n_predict: int,
        n_probs: int,
        stream: bool,
        cache_prompt: bool,
        logit_bias: Mapping[int, float] | None,
        seed: int,
    ) -> tuple[str, dict[str, Any]]:
        prompt = [int(t) for t in prompt]
        if not prompt:
            raise ValueError("the prompt needs at least one token")
        if self.api == LLAMA_CPP:
            body: dict[str, Any] = {
                "prompt": prompt,
                "n_predict": n_predict,
                "n_probs": n_probs,
                "temperature": 0.0,
                "top_k": 1,
                "seed": seed,
                "stream": stream,
                "cache_prompt": cache_prompt,
                "return_tokens": True,
            }
            if logit_bias:  # [id, false] bans a token outright
                body["logit_bias"] = [
                    [t, False if b == float("-inf") else b] for t, b in logit_bias.items()
                ]
            return "/completion", body
        body = {
            "model": self.model_name(),
            "prompt": self._prompt_text(prompt) if self._text_prompts else prompt,
            "max_tokens": n_predict,
            "temperature": 0.0,
            "seed": seed,
            "stream": stream,
            "echo": False,
            # extensions: llama-server's prompt cache, vLLM's ids for tokens and results
            "cache_prompt": cache_prompt,
            "return_tokens_as_token_ids": True,
        }
        if n_probs > 0:
            body["logprobs"] = n_probs
        if logit_bias:
            body["logit_bias"] = {str(t): max(b, -100.0) for t, b in logit_bias.items()}
        return "/v1/completions", body

    def complete(
        self,
        prompt: Sequence[int],
        *,
        n_predict: int,
        n_probs: int = 0,
        cache_prompt: bool = True,
        logit_bias: Mapping[int, float] | None = None,
        seed: int = 0,
        cancel: Cancel | None = None,
        deadline: float | None = None,
    ) -> Completion:
        """Generate up to ``n_predict`` tokens greedily after ``prompt`` (token ids) and
        return them with the top ``n_probs`` alternatives at each position.

        ``logit_bias`` maps ids to a bias (``-inf`` bans).  A cancel or deadline gives a
        ``Completion`` with no steps and stop "cancelled" or "deadline".
        """
        args = (prompt, n_predict, n_probs, False, cache_prompt, logit_bias, seed)
        try:
            path, answer = self._send(args, cancel, deadline)
        except Stopped as stop:
            return Completion((), CompletionEnd(stop.reason))
        with self._reading(path):
            if path == "/completion":
                return self._native_completion(_dict(answer), deadline)
            return self._openai_completion(_dict(answer))

    def stream(
        self,
        prompt: Sequence[int],
        *,
        n_predict: int,
        n_probs: int = 0,
        cache_prompt: bool = True,
        logit_bias: Mapping[int, float] | None = None,
        seed: int = 0,
        cancel: Cancel | None = None,
        deadline: float | None = None,
    ) -> CompletionStream:
        """``complete`` as a stream of steps (see ``CompletionStream``).  Returns once the
        server has begun to answer; errors it answers with instead raise here."""
        args = (prompt, n_predict, n_probs, True, cache_prompt, logit_bias, seed)
        try:
            path, events = self._send(args, cancel, deadline)
        except Stopped as stop:
            return CompletionStream.ended(CompletionEnd(stop.reason))
        where = f"{self.url}{path}"
        if path == "/completion":
            last = [-1]

            def parse_native(event: Any) -> tuple[list[Step], CompletionEnd | None]:
                with self._reading(path):
                    event = _dict(event)
                    if event.get("stop"):
                        return [], self._native_end(event)
                    step = self._native_stream_step(event, last[0])
                if step is None:
                    return [], None
                last[0] = step.position
                return [step], None

            return CompletionStream(events, parse_native, where)
        position = [0]
        resolve = self._resolver()

        def parse_openai(event: Any) -> tuple[list[Step], CompletionEnd | None]:
            with self._reading(path):
                choice = self._openai_choice(event)
                steps = self._openai_steps(choice, position[0], resolve)
            position[0] += len(steps)
            reason = choice.get("finish_reason")
            if reason is None:
                return steps, None
            return steps, self._openai_end(event, reason, position[0])

        return CompletionStream(events, parse_openai, where)

    def _send(
        self, args: tuple[Any, ...], cancel: Cancel | None, deadline: float | None
    ) -> tuple[str, Any]:
        """Send a completion request (``_body``'s arguments); the path and the answer (the
        decoded JSON, or the ``EventStream`` when streaming).

        An OpenAI server that refuses token ids as the prompt (llama-cpp-python's) gets
        the prompt again as text, special tokens spelled out, which it parses back into
        the same ids: this needs the local vocabulary.
        """
        while True:
            path, body = self._body(*args)
            try:
                if body["stream"]:
                    return path, self.http.stream(path, body, cancel=cancel, deadline=deadline)
                answer = self.http.request("POST", path, body, cancel=cancel, deadline=deadline)
                return path, answer
            except ServerHTTPError as exc:
                if not self._refuses_token_prompts(exc):
                    raise
                self._text_prompts = True

    def _refuses_token_prompts(self, exc: ServerHTTPError) -> bool:
        """Whether ``exc`` is a refusal of a token-id prompt we can repair (llama-cpp-python
        answers its validation errors with 500; one retry at most)."""
        return (
            exc.status in (400, 422, 500)
            and "prompt" in exc.detail.lower()
            and not self._text_prompts
            and self._vocab is not None
            and self.api == OPENAI
            and self._is_llama_server is not True
        )

    def _prompt_text(self, prompt: Sequence[int]) -> str:
        """The prompt as text, special tokens as their text; without a leading BOS, which
        the server adds itself where the model wants one."""
        vocab = self._vocab
        if vocab is None:
            raise ServerError(
                f"{self.url} takes prompts only as text: give a local copy of the model's "
                "vocabulary with the modelVocab setting"
            )
        ids = list(prompt)
        if ids and vocab.add_bos and ids[0] == vocab.fim.bos:
            ids = ids[1:]
        return b"".join(vocab.token_bytes(t) for t in ids).decode("utf-8", errors="replace")

    # ------------------------------------------------------------ llama.cpp answers

    @staticmethod
    def _native_end(answer: dict[str, Any]) -> CompletionEnd:
        stop = answer.get("stop_type", "none")
        timings = answer.get("timings")
        tokens = answer.get("tokens") or []
        return CompletionEnd(
            stop=_FINISH.get(stop, str(stop)),
            n_predicted=int(answer.get("tokens_predicted", 0) or 0),
            n_prompt=int(answer.get("tokens_evaluated", 0) or 0),
            n_cached=int((timings or {}).get("cache_n", 0) or 0),
            tokens=tuple(_int_list(tokens)),
            timings=timings if isinstance(timings, dict) else {},
        )

    def _native_stream_step(self, event: dict[str, Any], last: int) -> Step | None:
        """The step in one streamed ``/completion`` event (None for a progress event)."""
        tokens = _int_list(event.get("tokens") or [])
        if not tokens:
            return None
        position = int(event.get("tokens_predicted", last + 2)) - 1
        skipped = max(0, position - last - 1)
        probs = event.get("completion_probabilities")
        if isinstance(probs, list) and probs:
            return llama_step(probs[0], position, skipped, self._piece_of)
        text = str(event.get("content", "")).encode("utf-8")
        piece = self._piece_of(tokens[-1]) if skipped else text
        return Step(position, tokens[-1], None, piece, text, (), skipped)

    def _piece_of(self, token: int) -> bytes:
        """One token's bytes, from the vocabulary if loaded, else asked once and kept."""
        if self._vocab is not None:
            return self._vocab.token_bytes(token)
        piece = self._pieces.get(token)
        if piece is None:
            piece = self._pieces[token] = self.token_pieces([token])[0]
        return piece

    def _native_completion(self, answer: dict[str, Any], deadline: float | None) -> Completion:
        end = self._native_end(answer)
        entries = answer.get("completion_probabilities") or []
        if not isinstance(entries, list):
            raise ServerProtocolError("completion_probabilities is not a list")
        if not entries:
            return Completion((), end)
        tokens = list(end.tokens)
        if len(entries) == len(tokens) or not tokens:
            return Completion(tuple(llama_step(e, i) for i, e in enumerate(entries)), end)
        # Tokens ending inside a UTF-8 character have no entry: find them as the server does.
        pieces = self.token_pieces(tokens, deadline=deadline)
        steps: list[Step] = []
        text, pending = b"", 0
        entry_iter = iter(entries)
        for position, piece in enumerate(pieces):
            text += piece
            if incomplete_utf8_tail(text):
                pending += 1
                continue
            entry = next(entry_iter, None)
            if entry is None:
                break
            steps.append(llama_step(entry, position, pending, self._piece_of))
            pending = 0
        return Completion(tuple(steps), end)

    # ------------------------------------------------------------ OpenAI answers

    def _resolver(self) -> TokenResolver:
        vocab = self._vocab
        return resolve_token_id_spelling(vocab.resolve if vocab is not None else None)

    def _openai_choice(self, answer: Any) -> dict[str, Any]:
        choices = _dict(answer).get("choices")
        if not isinstance(choices, list) or not choices:
            raise ServerProtocolError("no choices")
        return _dict(choices[0])

    def _openai_steps(
        self, choice: dict[str, Any], first: int, resolve: TokenResolver
    ) -> list[Step]:
        logprobs = choice.get("logprobs")
        if isinstance(logprobs, dict) and isinstance(logprobs.get("content"), list):
            # llama-server: llama.cpp's entries, ids included
            return [llama_step(e, first + i) for i, e in enumerate(logprobs["content"])]
        if isinstance(logprobs, dict) and logprobs.get("tokens") is not None:
            steps = legacy_steps(logprobs, first, resolve)
            ids = choice.get("token_ids")  # vLLM's return_token_ids
            if isinstance(ids, list) and len(ids) == len(steps):
                steps = [
                    Step(s.position, int(t), s.logprob, s.piece, s.text, s.top, s.skipped)
                    for s, t in zip(steps, ids)
                ]
            return steps
        ids = choice.get("token_ids")
        if isinstance(ids, list):
            return [Step(first + i, int(t), None, b"", b"", ()) for i, t in enumerate(ids)]
        return []

    def _openai_end(self, answer: dict[str, Any], reason: Any, n_steps: int) -> CompletionEnd:
        usage = answer.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        details = usage.get("prompt_tokens_details")
        details = details if isinstance(details, dict) else {}
        timings = answer.get("timings")
        return CompletionEnd(
            stop=_FINISH.get(str(reason), str(reason)),
            n_predicted=int(usage.get("completion_tokens", n_steps) or n_steps),
            n_prompt=int(usage.get("prompt_tokens", 0) or 0),
            n_cached=int(details.get("cached_tokens", 0) or 0),
            timings=timings if isinstance(timings, dict) else {},
        )

    def _openai_completion(self, answer: dict[str, Any]) -> Completion:
        choice = self._openai_choice(answer)
        steps = self._openai_steps(choice, 0, self._resolver())
        end = self._openai_end(answer, choice.get("finish_reason") or "none", len(steps))
        return Completion(tuple(steps), end)
