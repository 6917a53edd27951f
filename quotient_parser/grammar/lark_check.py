"""Check python.gram against CPython, using lark's Earley parser.

Stand-in for fimlsp's own recognizer while that is being written: translates
``python.gram`` (format: docs/architecture.md) into a lark grammar for one
target version, feeds it token streams produced by CPython's ``tokenize``
module (3.12+ tokenizes f-strings the way our lexer does), and compares
acceptance with ``ast.parse`` of the target interpreter.

Usage (from the repository root)::

    python -m quotient_parser.grammar.lark_check snippet --target 3.13 'x = 1'
    python -m quotient_parser.grammar.lark_check files --target 3.13 [--limit N] [PATH ...]
    python -m quotient_parser.grammar.lark_check mutants --target 3.13 --count N [PATH ...]

Interpreters are looked up under /root/.pyenv/versions (see PYENV_ROOT).
Requires ``pip install lark``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

GRAMMAR_PATH = Path(__file__).with_name("python.gram")
PYENV_ROOT = Path(os.environ.get("PYENV_ROOT", "/root/.pyenv")) / "versions"

# --------------------------------------------------------------------------
# Reading python.gram
# --------------------------------------------------------------------------
#
# Expression tree nodes (tuples):
#   ("seq", [node...])   ("alt", [node...])   ("opt", node)  ("star", node)
#   ("plus", node)       ("sep", sep, elem)   ("rule", name) ("kind", KIND)
#   ("lit", text)  -- 'x': symbol kind x      ("soft", text) -- "x": NAME x


@dataclass
class Alternative:
    node: tuple
    min_version: tuple | None = None      # inclusive
    below_version: tuple | None = None    # exclusive

    def applies(self, target):
        if self.min_version and target < self.min_version:
            return False
        if self.below_version and target >= self.below_version:
            return False
        return True


_TOKEN_RE = re.compile(r"""
    (?P<ws>[ \t\r\n]+)
  | (?P<comment>\#[^\n]*)
  | (?P<gate>@(?:<?\d+\.\d+)(?:,<\d+\.\d+)?)
  | (?P<lit>'[^'\n]+')
  | (?P<soft>"[^"\n]+")
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>[|()\[\]*+?.:])
""", re.VERBOSE)


def _version(text):
    major, minor = text.split(".")
    return (int(major), int(minor))


def parse_gate(text):
    """'@3.10' -> ((3,10), None); '@<3.12' -> (None, (3,12)); '@3.9,<3.12'."""
    lo = hi = None
    for part in text[1:].split(","):
        if part.startswith("<"):
            hi = _version(part[1:])
        else:
            lo = _version(part)
    return lo, hi


def _split_rules(text):
    """Yield (name, body, lineno) for each rule of a .gram text."""
    current = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0] if "#" in raw and not _hash_in_quotes(raw) else raw
        if not line.strip():
            continue
        if line[0] in " \t":
            if current is None:
                raise SyntaxError(f"line {lineno}: continuation without a rule")
            current[1].append(line)
            continue
        m = re.match(r"([a-z_][a-z0-9_]*)\s*:(.*)$", line)
        if not m:
            raise SyntaxError(f"line {lineno}: cannot read {raw!r}")
        if current:
            yield current[0], "\n".join(current[1]), current[2]
        current = (m.group(1), [m.group(2)], lineno)
    if current:
        yield current[0], "\n".join(current[1]), current[2]


def _hash_in_quotes(line):
    return bool(re.search(r"'[^']*#[^']*'|\"[^\"]*#[^\"]*\"", line))


class _Reader:
    def __init__(self, body, rule):
        self.rule = rule
        self.toks = []
        pos = 0
        while pos < len(body):
            m = _TOKEN_RE.match(body, pos)
            if not m:
                raise SyntaxError(f"rule {rule}: cannot read {body[pos:pos+20]!r}")
            pos = m.end()
            if m.lastgroup in ("ws", "comment"):
                continue
            self.toks.append((m.lastgroup, m.group()))
        self.i = 0

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else (None, None)

    def take(self):
        tok = self.peek()
        self.i += 1
        return tok

    def error(self, msg):
        raise SyntaxError(f"rule {self.rule}: {msg} near token {self.i}: {self.peek()}")

    def rule_alternatives(self):
        alts = []
        if self.peek() == ("punct", "|"):
            self.take()
        while True:
            node = self.sequence()
            lo = hi = None
            if self.peek()[0] == "gate":
                lo, hi = parse_gate(self.take()[1])
            alts.append(Alternative(node, lo, hi))
            if self.peek() == ("punct", "|"):
                self.take()
                continue
            if self.peek()[0] is not None:
                self.error("unexpected")
            return alts

    def alternatives(self, close):
        alts = [self.sequence()]
        while self.peek() == ("punct", "|"):
            self.take()
            alts.append(self.sequence())
        if self.take() != ("punct", close):
            self.error(f"expected {close}")
        return alts[0] if len(alts) == 1 else ("alt", alts)

    def sequence(self):
        items = []
        while True:
            kind, text = self.peek()
            if kind is None or kind == "gate" or text in ("|", ")", "]"):
                break
            items.append(self.item())
        if not items:
            self.error("empty alternative")
        return items[0] if len(items) == 1 else ("seq", items)

    def item(self):
        node = self.atom()
        kind, text = self.peek()
        if text == ".":
            self.take()
            elem = self.atom()
            if self.take() != ("punct", "+"):
                self.error("expected + after s.e")
            return ("sep", node, elem)
        if text in ("*", "+", "?"):
            self.take()
            return ({"*": "star", "+": "plus", "?": "opt"}[text], node)
        return node

    def atom(self):
        kind, text = self.take()
        if kind == "name":
            return ("kind", text) if text.isupper() else ("rule", text)
        if kind == "lit":
            return ("lit", text[1:-1])
        if kind == "soft":
            return ("soft", text[1:-1])
        if text == "(":
            return self.alternatives(")")
        if text == "[":
            return ("opt", self.alternatives("]"))
        self.error("unexpected")


def load_grammar(path=GRAMMAR_PATH):
    """Return {rule name: [Alternative, ...]} in file order."""
    rules = {}
    for name, body, lineno in _split_rules(Path(path).read_text()):
        if name in rules:
            raise SyntaxError(f"line {lineno}: rule {name} defined twice")
        rules[name] = _Reader(body, name).rule_alternatives()
    return rules


def walk(node):
    yield node
    tag = node[0]
    if tag in ("seq", "alt"):
        for child in node[1]:
            yield from walk(child)
    elif tag in ("opt", "star", "plus"):
        yield from walk(node[1])
    elif tag == "sep":
        yield from walk(node[1])
        yield from walk(node[2])


def check_grammar(rules):
    """Undefined / unused rules (list of messages)."""
    problems = []
    used = {"file"}
    for name, alts in rules.items():
        for alt in alts:
            for node in walk(alt.node):
                if node[0] == "rule":
                    used.add(node[1])
                    if node[1] not in rules:
                        problems.append(f"{name}: undefined rule {node[1]}")
    for name in rules:
        if name not in used:
            problems.append(f"unused rule {name}")
    return problems


# --------------------------------------------------------------------------
# Translation to lark
# --------------------------------------------------------------------------

TOKEN_KINDS = ["NAME", "NUMBER", "STRING", "BYTES", "FSTRING_START", "FSTRING_MIDDLE",
               "FSTRING_END", "NEWLINE", "INDENT", "DEDENT", "ENDMARKER"]


class LarkGrammar:
    """python.gram for one target as a lark grammar, plus the symbol mapping."""

    def __init__(self, target, path=GRAMMAR_PATH):
        self.target = tuple(target)
        self.rules = load_grammar(path)
        self.literals = {}   # symbol kind -> lark terminal
        self.softs = {}      # soft keyword text -> lark terminal
        lines = []
        for name, alts in self.rules.items():
            live = [a for a in alts if a.applies(self.target)]
            if live:
                body = "\n    | ".join(self._expr(a.node) for a in live)
            else:
                body = "NEVER_MATCHES"
            lines.append(f"r_{name}: {body}")
        names = " | ".join(["NAME"] + sorted(self.softs.values()))
        lines.append(f"_any_name: {names}")
        terminals = set(TOKEN_KINDS) | set(self.literals.values()) | set(self.softs.values())
        terminals.add("NEVER_MATCHES")
        lines.append("%declare " + " ".join(sorted(terminals)))
        self.text = "\n".join(lines) + "\n"

    def _terminal(self, text):
        if text not in self.literals:
            if re.fullmatch(r"[A-Za-z_]+", text):
                self.literals[text] = "KW_" + text.upper()
            else:
                self.literals[text] = f"OP_{len(self.literals)}"
        return self.literals[text]

    def _expr(self, node, parens=False):
        tag = node[0]
        if tag == "rule":
            return f"r_{node[1]}"
        if tag == "kind":
            return "_any_name" if node[1] == "NAME" else node[1]
        if tag == "lit":
            return self._terminal(node[1])
        if tag == "soft":
            if node[1] not in self.softs:
                self.softs[node[1]] = "SK_" + re.sub(r"\W", "_", node[1]).upper() + f"_{len(self.softs)}"
            return self.softs[node[1]]
        if tag == "seq":
            out = " ".join(self._expr(c, True) for c in node[1])
            return f"({out})" if parens else out
        if tag == "alt":
            return "(" + " | ".join(self._expr(c) for c in node[1]) + ")"
        if tag == "opt":
            return f"[{self._expr(node[1])}]"
        if tag == "star":
            return f"({self._expr(node[1])})*"
        if tag == "plus":
            return f"({self._expr(node[1])})+"
        if tag == "sep":
            e, s = self._expr(node[2], True), self._expr(node[1], True)
            return f"({e} ({s} {e})*)"
        raise ValueError(node)

    def lark_type(self, kind, text):
        """Lark terminal for one of our symbols, or None if no rule can use it."""
        if kind == "NAME":
            return self.softs.get(text, "NAME")
        if kind in TOKEN_KINDS:
            return kind
        return self.literals.get(kind)


class LarkRecognizer:
    """recognize(symbols) -> bool, for symbols [(kind, text, start), ...]."""

    def __init__(self, target):
        from lark import Lark
        from lark.lexer import Lexer

        class _ListLexer(Lexer):
            def __init__(self, lexer_conf):
                pass

            def lex(self, data):
                return iter(data)

        self.grammar = LarkGrammar(target)
        self.parser = Lark(self.grammar.text, parser="earley", lexer=_ListLexer,
                           start="r_file", ambiguity="resolve")
        self.cache = {}

    def _recognize_kinds(self, types):
        from lark import Token
        from lark.exceptions import LarkError
        key = tuple(types)
        if key not in self.cache:
            try:
                self.parser.parse([Token(t, "") for t in types])
                self.cache[key] = True
            except LarkError:
                self.cache[key] = False
        return self.cache[key]

    def recognize(self, symbols):
        types = []
        for kind, text, _ in symbols:
            t = self.grammar.lark_type(kind, text)
            if t is None:
                return False
            types.append(t)
        # `file: [statements] ENDMARKER` with `statements: statement+`: a module
        # is accepted iff each top-level statement is; check them one by one.
        for chunk in split_top_level(types):
            if not self._recognize_kinds(chunk + ["ENDMARKER"]):
                return False
        if not types or types[-1] != "ENDMARKER":
            return False
        return True


class EarleyRecognizer:
    """Same interface as LarkRecognizer, on fimlsp's own Earley engine.

    Uses quotient_parser.grammar_tools and quotient_parser.earley directly (not
    the lexer: symbols come from CPython's tokenize), so it works before the
    lexer package exists.
    """

    def __init__(self, target):
        grammar_tools, earley = _import_engine()
        self.grammar = grammar_tools.load_grammar(tuple(target), str(GRAMMAR_PATH))
        self.automaton = earley.Automaton(self.grammar)
        self.initial = earley.Chart.initial(self.automaton)
        ids = self.grammar.terminal_ids
        self.kind_ids = {k: v for k, v in ids.items() if k not in self.grammar.soft_keywords}
        self.soft_ids = {w: self.automaton.scan_class((ids["NAME"], ids[w]))
                         for w in self.grammar.soft_keywords}

    def recognize(self, symbols):
        chart = self.initial
        for kind, text, _ in symbols:
            sid = self.soft_ids.get(text) if kind == "NAME" else None
            if sid is None:
                sid = self.kind_ids.get(kind)
                if sid is None:
                    return False
            chart = chart.step(sid)
            if chart is None:
                return False
        return chart.accepting


def _import_engine():
    """quotient_parser.grammar_tools and .earley, even if the package's
    __init__ cannot be imported yet (it needs the lexer)."""
    import importlib
    import types
    root = Path(__file__).resolve().parent.parent
    try:
        return (importlib.import_module("quotient_parser.grammar_tools"),
                importlib.import_module("quotient_parser.earley"))
    except ImportError:
        for name in [n for n in sys.modules if n == "quotient_parser" or n.startswith("quotient_parser.")]:
            del sys.modules[name]
        pkg = types.ModuleType("quotient_parser")
        pkg.__path__ = [str(root)]
        sys.modules["quotient_parser"] = pkg
        return (importlib.import_module("quotient_parser.grammar_tools"),
                importlib.import_module("quotient_parser.earley"))


def split_top_level(types):
    """Split a symbol-type list (ending with ENDMARKER) into top-level statements."""
    chunks, current, depth = [], [], 0
    body = types[:-1] if types and types[-1] == "ENDMARKER" else types
    for i, t in enumerate(body):
        current.append(t)
        if t == "INDENT":
            depth += 1
        elif t == "DEDENT":
            depth -= 1
        if depth == 0 and t in ("NEWLINE", "DEDENT"):
            nxt = body[i + 1] if i + 1 < len(body) else None
            if nxt not in ("DEDENT", "INDENT"):
                chunks.append(current)
                current = []
    if current:
        chunks.append(current)
    return chunks


# --------------------------------------------------------------------------
# CPython oracles: tokenize (3.12+) and ast.parse (target), in subprocesses
# --------------------------------------------------------------------------

WORKER = r'''
import ast, io, json, keyword, sys, tokenize, warnings
warnings.simplefilter("ignore")
KW = set(keyword.kwlist)
def lines_offsets(src):
    offs, pos = [0, 0], 0
    for line in src.splitlines(True):
        pos += len(line)
        offs.append(pos)
    return offs
def symbols(src):
    offs = lines_offsets(src)
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        name = tokenize.tok_name[tok.type]
        text = tok.string
        start = offs[tok.start[0]] + tok.start[1] if tok.start[0] < len(offs) else len(src)
        if name in ("NL", "COMMENT", "ENCODING", "TYPE_COMMENT"):
            continue
        if name == "OP":
            kind = text
        elif name == "NAME":
            kind = text if text in KW else "NAME"
        elif name == "STRING":
            prefix = text[:len(text) - len(text.lstrip("bBrRuUfF"))]
            kind = "BYTES" if "b" in prefix.lower() else "STRING"
        elif name == "FSTRING_MIDDLE":
            if not text:
                continue
            kind = name
        elif name == "ERRORTOKEN":
            raise SyntaxError("error token %r" % text)
        else:
            kind = name
        out.append((kind, text, start))
    return out
for line in sys.stdin:
    req = json.loads(line)
    src = req["src"]
    res = {}
    if req.get("ast", True):
        try:
            ast.parse(src)
            res["ast"] = True
        except (SyntaxError, ValueError, MemoryError, RecursionError, OverflowError) as e:
            res["ast"] = False
            res["err"] = "%s: %s" % (type(e).__name__, e)
    if req.get("tokens"):
        try:
            res["symbols"] = symbols(src)
        except (SyntaxError, tokenize.TokenError, ValueError, IndentationError) as e:
            res["tokerr"] = "%s: %s" % (type(e).__name__, e)
    sys.stdout.write(json.dumps(res) + "\n")
    sys.stdout.flush()
'''


def interpreter(version):
    """Path of the pyenv interpreter for (major, minor), or None."""
    pattern = str(PYENV_ROOT / f"{version[0]}.{version[1]}.*" / "bin" / "python")
    found = sorted(glob.glob(pattern))
    return found[-1] if found else None


class Oracle:
    def __init__(self, version):
        exe = interpreter(version)
        if exe is None:
            raise RuntimeError(f"no interpreter for {version}")
        self.version = version
        self.proc = subprocess.Popen([exe, "-c", WORKER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, encoding="utf-8",
                                     errors="surrogatepass")

    def query(self, src, ast=True, tokens=False):
        self.proc.stdin.write(json.dumps({"src": src, "ast": ast, "tokens": tokens}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("oracle died")
        return json.loads(line)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


class Checker:
    """Compare the grammar (for target) with CPython (target) on sources."""

    def __init__(self, target, engine="lark"):
        self.target = tuple(target)
        self.recognizer = (LarkRecognizer if engine == "lark" else EarleyRecognizer)(self.target)
        self.ast_oracle = Oracle(self.target)
        tok_version = self.target if self.target >= (3, 12) else (3, 12)
        self.tok_oracle = (self.ast_oracle if tok_version == self.target
                           else Oracle(tok_version))

    def check(self, src):
        """-> dict(ast=bool, ours=bool|None, err=..., tokerr=...)."""
        res = self.tok_oracle.query(src, ast=self.tok_oracle is self.ast_oracle, tokens=True)
        if self.tok_oracle is not self.ast_oracle:
            res.update(self.ast_oracle.query(src))
        if "symbols" in res:
            res["ours"] = self.recognizer.recognize([tuple(s) for s in res.pop("symbols")])
        else:
            res["ours"] = None
        return res

    def symbols(self, src):
        return self.tok_oracle.query(src, ast=False, tokens=True).get("symbols")


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------

def stdlib_files(target):
    exe = interpreter(target)
    lib = Path(exe).parent.parent / "lib" / f"python{target[0]}.{target[1]}"
    files = [p for p in lib.rglob("*.py") if "site-packages" not in p.parts]
    return sorted(files)


def read_source(path):
    try:
        return Path(path).read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None


def cmd_snippet(args):
    checker = Checker(args.target, args.engine)
    for src in args.sources:
        src = src.encode().decode("unicode_escape") if args.escapes else src
        if not src.endswith("\n"):
            src += "\n"
        res = checker.check(src)
        flag = "ok  " if res["ours"] == res["ast"] else "DIFF"
        print(f"{flag} ast={res['ast']!s:5} ours={res['ours']!s:5} {src!r} {res.get('err', '')}")


def _select_files(args):
    paths = [Path(p) for p in args.paths] if args.paths else stdlib_files(args.target)
    random.seed(args.seed)
    if args.limit and len(paths) > args.limit:
        paths = random.sample(paths, args.limit)
    return paths


def cmd_files(args):
    checker = Checker(args.target, args.engine)
    stats = {"same": 0, "diff": 0, "skipped": 0}
    for path in _select_files(args):
        src = read_source(path)
        if src is None or (args.max_bytes and len(src) > args.max_bytes):
            stats["skipped"] += 1
            continue
        t0 = time.time()
        res = checker.check(src)
        if res["ours"] is None:
            stats["skipped"] += 1
            continue
        if res["ours"] == res["ast"]:
            stats["same"] += 1
        else:
            stats["diff"] += 1
            print(f"DIFF {path}: ast={res['ast']} ours={res['ours']} {res.get('err', '')}", flush=True)
        if args.verbose:
            print(f"  {path} {time.time() - t0:.1f}s", flush=True)
    print(json.dumps(stats))


MUTANT_VOCAB = [
    "(", ")", "[", "]", "{", "}", ",", ":", ";", ".", "=", "*", "**", "->", ":=",
    "+", "-", "@", "|", "&", "~", "<", "==", "+=", "...", "!",
    "x", "_", "1", "1j", "'s'", "b'b'", "f'{x}'", "None", "True",
    "if", "else", "for", "in", "not", "is", "and", "or", "lambda", "yield",
    "await", "async", "del", "def", "class", "return", "import", "from", "as",
    "with", "while", "try", "except", "finally", "pass", "global", "nonlocal",
    "assert", "raise", "match", "case", "type", "print", "\n", "\n    ",
]


def mutate(src, symbols, rng):
    """Delete, insert or replace one symbol in src; returns (new source, description)."""
    spans = [(s[2], s[2] + len(s[1])) for s in symbols if s[1] and s[0] not in ("NEWLINE",)]
    if not spans:
        return None, None
    start, end = rng.choice(spans)
    op = rng.choice(["delete", "insert", "replace"])
    word = rng.choice(MUTANT_VOCAB)
    if op == "delete":
        return src[:start] + src[end:], f"delete {src[start:end]!r}@{start}"
    if op == "insert":
        pos = rng.choice([start, end])
        return src[:pos] + " " + word + " " + src[pos:], f"insert {word!r}@{pos}"
    return src[:start] + " " + word + " " + src[end:], f"replace {src[start:end]!r}@{start} by {word!r}"


def cmd_mutants(args):
    checker = Checker(args.target, args.engine)
    rng = random.Random(args.seed)
    paths = _select_files(args)
    stats = {"same": 0, "diff": 0, "untokenizable": 0, "accepted_mutants": 0}
    done = 0
    while done < args.count and paths:
        path = rng.choice(paths)
        src = read_source(path)
        if src is None or (args.max_bytes and len(src) > args.max_bytes):
            paths.remove(path)
            continue
        symbols = checker.symbols(src)
        if symbols is None:
            paths.remove(path)
            continue
        new, desc = mutate(src, symbols, rng)
        if new is None:
            continue
        res = checker.check(new)
        if res["ours"] is None:
            stats["untokenizable"] += 1
            continue
        done += 1
        stats["accepted_mutants"] += res["ast"]
        if res["ours"] == res["ast"]:
            stats["same"] += 1
        else:
            stats["diff"] += 1
            pos = int(re.search(r"@(\d+)", desc).group(1))
            line_start = new.rfind("\n", 0, max(pos - 1, 0)) + 1
            line_end = new.find("\n", pos + 1)
            context = new[line_start:line_end if line_end >= 0 else None]
            print(f"DIFF {path} {desc}: ast={res['ast']} ours={res['ours']} "
                  f"{res.get('err', '')}\n    {context!r}", flush=True)
    print(json.dumps(stats))


def cmd_table(args):
    """Run tests/test_grammar_versions.py's snippet table against the grammar."""
    import importlib.util
    path = Path(__file__).resolve().parents[2] / "tests" / "test_grammar_versions.py"
    spec = importlib.util.spec_from_file_location("test_grammar_versions", path)
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)
    versions = [args.target] if args.target else table.VERSIONS
    total = 0
    for version in versions:
        verdicts = table.cpython_verdicts(version)
        if verdicts is None:
            print(f"skip {version}: no interpreter")
            continue
        rec = (LarkRecognizer if args.engine == "lark" else EarleyRecognizer)(version)
        tok = Oracle(max(version, (3, 12)))
        bad = 0
        for snippet in table.SNIPPETS:
            src = table.module_source(snippet)
            res = tok.query(src, ast=False, tokens=True)
            if "symbols" not in res:
                ours = None
            else:
                ours = rec.recognize([tuple(x) for x in res["symbols"]])
            if ours != verdicts[snippet]:
                bad += 1
                print(f"{version[0]}.{version[1]} DIFF cpython={verdicts[snippet]} ours={ours} {snippet!r}")
        tok.close()
        print(f"{version[0]}.{version[1]}: {len(table.SNIPPETS) - bad}/{len(table.SNIPPETS)} agree")
        total += bad
    return total


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def target(text):
        return _version(text)

    p = sub.add_parser("snippet")
    p.add_argument("--target", type=target, default=(3, 13))
    p.add_argument("--engine", choices=["lark", "earley"], default="lark")
    p.add_argument("--escapes", action="store_true", help="decode \\n etc. in sources")
    p.add_argument("sources", nargs="+")
    p.set_defaults(func=cmd_snippet)
    for name, func in (("files", cmd_files), ("mutants", cmd_mutants)):
        p = sub.add_parser(name)
        p.add_argument("--target", type=target, default=(3, 13))
        p.add_argument("--limit", type=int, default=0, help="sample this many files")
        p.add_argument("--max-bytes", type=int, default=0)
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--engine", choices=["lark", "earley"], default="lark")
        p.add_argument("--verbose", action="store_true")
        p.add_argument("paths", nargs="*")
        if name == "mutants":
            p.add_argument("--count", type=int, default=100)
        p.set_defaults(func=func)
    p = sub.add_parser("table")
    p.add_argument("--target", type=target, default=None)
    p.add_argument("--engine", choices=["lark", "earley"], default="earley")
    p.set_defaults(func=cmd_table)
    p = sub.add_parser("lint")
    p.set_defaults(func=lambda a: print("\n".join(check_grammar(load_grammar())) or "ok"))
    args = ap.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
