"""Tiny random-weight GGUF models with real tokenizers, for the tests and benchmarks.

Not part of the installed package: the tests, the benchmarks and the editors' end-to-end
scripts run from the repository, whose root is importable.  ``python -m testmodels.tiny``
builds a model (``build OUT.gguf --family NAME``), lists the families (``--list``) and
fetches the vocabularies that do not ship here (``fetch-vocab``).
"""
