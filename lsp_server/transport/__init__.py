"""The JSON-RPC transport and message layer, hardened against what clients send.

One job a module: :mod:`.framing` (bytes to bodies), :mod:`.messages` (decoding, ids,
error descriptions), :mod:`.guard` (the checks every message passes), :mod:`.serving`
(stdio and TCP, the writer thread), and :mod:`.pygls_adapter`, the one place that
touches pygls' private methods and fields.  Import from the modules; this package
re-exports nothing.
"""
