"""Meta models: a public model name whose requests a small program routes (console contract §6.3).

Pure: the lexer and parser turn source into a ``Program``, ``checks`` validates it, ``evaluate``
resolves it against request variables.  Executing ``parallel`` and ``judge`` (upstream calls) is
the gateway's job; this package only says what to call.
"""
