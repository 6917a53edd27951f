"""fimlsp's language server (Language Server Protocol over stdio).

Empty for now: the server arrives with a later issue.
"""
