"""``lockgate-admin``: what an operator needs when the console cannot help (locked out, no
process running, a deploy to check).

It reads the same ``--database``, ``--secret-file``, ``--config`` and ``--redis`` options (and
``LOCKGATE_*`` variables) as ``twistd lockgate``, works on the database directly with the
store's own code, and exits non-zero when something is wrong, so scripts can rely on it.
"""
