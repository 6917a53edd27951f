"""fimlsp: syntax-guaranteed fill-in-the-middle completion for Python over LSP.

``lsp_server.server`` is the language server (the front), ``lsp_server.engine`` its
model worker, run in an engine process (``lsp_server.engine_process``, started and
supervised by ``lsp_server.engine_proxy``), and ``lsp_server.planner`` what it
answers, ``lsp_server.decoding`` the constrained decoding loop and
``lsp_server.model`` the model layer behind the backend interface of
``lsp_server.model.backend``.  ``fimlsp``
(``lsp_server.cli``) is the command line.  docs/architecture.md has the map.
"""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("fimlsp")
except _metadata.PackageNotFoundError:  # running from a checkout that was not installed
    __version__ = "0.0.0+unknown"
