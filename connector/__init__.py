"""The reference device programs: ``lockgate-connector`` and ``lockgate-sandboxd``.

They run on the user's machine (or an operator's sandbox host), hold one token-authenticated
link to Lockgate (agents contract §2.4 WebSocket, §2.3 long-poll as the fallback), and execute
the §2.7 actions inside a workspace. This package is a client of Lockgate's public protocol only:
it imports nothing from ``gateway``, ``console`` or ``tap`` (checked by ``.importlinter``), and only
``connector.main`` imports the global reactor.
"""
