"""fimlsp: syntax-guaranteed fill-in-the-middle completion for Python over LSP.

``lsp_server.server`` is the language server, ``lsp_server.engine`` its model
worker and ``lsp_server.planner`` what it answers, ``lsp_server.decoding`` the
constrained decoding loop and ``lsp_server.model`` the model layer behind the
backend interface of ``lsp_server.model.backend``.  ``fimlsp``
(``lsp_server.cli``) is the command line.  docs/architecture.md has the map.
"""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("fimlsp")
except _metadata.PackageNotFoundError:  # running from a checkout that was not installed
    __version__ = "0.0.0+unknown"
