"""Benchmarks and conformance checks for fimlsp (run from the repository root).

* ``python -m bench.grammar_coverage`` compares the recognizer with CPython's
  own parser on a corpus (by default the standard library and its tests);
* ``python -m bench.quotient_check`` checks the FIM quotient on cut files;
* ``python -m bench.tokenize_check`` compares the lexer with CPython's
  ``tokenize``;
* ``python -m bench.wasm_oracles install`` installs the CPython 3.14 and 3.15
  oracles (WebAssembly builds) that ``--oracle 3.14`` and ``--oracle 3.15``
  use.

The shared pieces: ``bench.corpus`` (corpora), ``bench.mutants``,
``bench.oracle`` (CPython's ``ast.parse`` behind a worker, ``--oracle``
resolution), ``bench.harness`` (time limits, percentiles, progress, options).
"""
