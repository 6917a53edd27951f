"""Benchmarks and conformance checks for fimlsp (run from the repository root).

* ``python -m bench.grammar_coverage`` compares the recognizer with CPython's
  own parser on a corpus (by default the standard library and its tests).
"""
