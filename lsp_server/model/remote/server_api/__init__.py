"""Talking to a shared inference server: the wire protocols a remote backend uses.

``ServerClient`` speaks llama-server's native API or OpenAI's ``/v1/completions``;
``ServerVocab`` finds FIM markers and end tokens from the server's vocabulary (or a local
copy, ``load_local_vocab``); ``ServerAvailability`` turns completions off while the
server fails and probes it with backoff.  Every failure is a ``ServerError`` subclass with
a message for the user.

The protocols, as llama-server (the llama.cpp llama-cpp-python 0.3.36 vendors) speaks
them; every shape below is checked against the real server by the tests:

* ``GET /props``: ``model_path``, ``total_slots``, ``default_generation_settings``
  (``n_ctx`` per slot and the default sampling ``params``), ``chat_template``,
  ``bos_token``/``eos_token`` (texts), ``build_info``.  ``GET /v1/models``: ``data[0].id``
  and ``data[0].meta`` (``n_vocab``, ``n_ctx``, ``n_ctx_train``, ``vocab_type``).
  ``GET /health``: ``{"status": "ok"}``, 503 while loading; public even with an API key.
* ``POST /tokenize`` ``{"content", "add_special", "parse_special" (default true),
  "with_pieces"}`` → ``{"tokens": [id]}`` or ``[{"id", "piece"}]`` where a piece is a
  string, or a list of byte values when not valid UTF-8; ``content`` may be a list mixing
  ids and strings, so the pieces of any ids come in one call.  ``POST /detokenize``
  ``{"tokens"}`` → ``{"content"}`` (special tokens as their text).
* ``POST /completion`` ``{"prompt": [ids], "n_predict", "n_probs", "temperature": 0,
  "cache_prompt", "return_tokens", "stream", "logit_bias": [[id, false]]}``.  Whole
  answer: ``content``, ``tokens`` (with ``return_tokens``), ``stop_type`` ("eos", "limit",
  "word", "none"), ``tokens_predicted``, ``tokens_evaluated``, ``timings`` (``cache_n``:
  prompt tokens reused from the cache) and ``completion_probabilities``: one entry per
  token ``{"id", "token", "bytes", "logprob", "top_logprobs": [{"id", "token", "bytes",
  "logprob"}]}``, log-probabilities of the raw logits (before sampling) best first.
  Streamed (SSE, ``data: {...}`` events, no ``[DONE]``): one event per token with
  ``content``, ``tokens: [id]``, ``tokens_predicted`` (1-based position) and
  ``completion_probabilities: [entry]``, then a last event with ``stop: true``,
  ``stop_type``, ``timings`` and empty ``tokens``.  An end-of-generation token comes as
  its own event (``content`` "", ``bytes`` []) before the last one.  A token that ends
  inside a UTF-8 character gets no event and no entry: the next token's event carries
  the bytes of both (``Step.skipped`` counts them).  Errors before streaming are the HTTP
  answer (``{"error": {"code", "message", "type"}}``), during streaming a
  ``data: {"error": ...}`` event; a 401 says ``Invalid API Key``.
* ``POST /v1/completions`` ``{"prompt": [ids], "max_tokens", "logprobs": N,
  "temperature": 0, "stream", "echo": false}``: llama-server answers in OpenAI's shape but
  puts llama.cpp's entries, ids included, in ``choices[0].logprobs.content`` (not the
  legacy ``tokens``/``top_logprobs``); streamed chunks carry one entry each and end with
  ``data: [DONE]``; ``finish_reason`` "stop" or "length".  vLLM and llama-cpp-python answer
  with the legacy ``{"tokens": [str], "token_logprobs", "top_logprobs": [{str: logprob}],
  "text_offset"}``: texts only.  vLLM spells tokens ``token_id:N`` when asked
  (``return_tokens_as_token_ids``, sent with every request); otherwise ids come from a
  local copy of the vocabulary (``ServerVocab.resolve``), which cannot tell apart tokens
  with the same text (these become ``Candidate.token`` None).

Other engines, from their documentation and source:

* vLLM (needs a GPU; not run here) serves ``/v1/completions`` with ``prompt`` a list of
  ids (``list[int] | list[list[int]] | str | list[str]``), ``logprobs`` up to
  ``--max-logprobs`` (default 20; more is a 400), ``temperature`` 0 for greedy, streamed
  logprobs per chunk.  Start it with ``vllm serve MODEL --return-tokens-as-token-ids``
  (tokens then come as ``token_id:N``; the request field of the same name does it per
  request where the version has it) and prefix caching on: the default of the V1 engine
  (0.8 and later), ``--enable-prefix-caching`` before.  From 0.10.2 ``return_token_ids``
  also gives the generated ids in ``choices[0].token_ids``.  ``--api-key`` guards only
  ``/v1`` paths.
* llama-cpp-python's server (``python -m llama_cpp.server``, the ``[server]`` extra)
  refuses token ids as the prompt (a 500 listing validation errors), parses special-token
  texts in a text prompt, and answers the legacy shape with texts only: partial UTF-8
  and control tokens come as "" and cannot be told apart.  The client then sends the
  prompt as text (it needs the local vocabulary for that) and maps texts back to ids.
"""

from __future__ import annotations

from .client import LLAMA_CPP, OPENAI, SERVER_APIS, CompletionStream, ServerApi, ServerClient
from .completions import Candidate, Completion, CompletionEnd, Step
from .errors import (
    ServerAuthError,
    ServerError,
    ServerHTTPError,
    ServerProtocolError,
    ServerTimeout,
    ServerTLSError,
    ServerUnreachable,
)
from .http import HttpClient, ServerAddress, Stopped, parse_server_url
from .retry import Backoff, ServerAvailability
from .vocab import LocalVocabulary, ServerVocab, load_local_vocab

__all__ = [
    "LLAMA_CPP",
    "OPENAI",
    "SERVER_APIS",
    "Backoff",
    "Candidate",
    "Completion",
    "CompletionEnd",
    "CompletionStream",
    "HttpClient",
    "LocalVocabulary",
    "ServerAddress",
    "ServerApi",
    "ServerAuthError",
    "ServerAvailability",
    "ServerClient",
    "ServerError",
    "ServerHTTPError",
    "ServerProtocolError",
    "ServerTLSError",
    "ServerTimeout",
    "ServerUnreachable",
    "ServerVocab",
    "Step",
    "Stopped",
    "load_local_vocab",
    "parse_server_url",
]
