"""An ``HTTPConnectionPool`` that does not log two lines per upstream connection.

Twisted's pool builds one client factory per new connection, and a factory is "noisy" by
default: every connection logs "Starting factory ..." and "Stopping factory ...".  On a gateway
that opens connections all day this buries the lines an operator needs, so the pool's factory
is the same class made quiet.  ``_HTTP11ClientFactory`` and ``_factory`` are Twisted's private
names (stable since 11.1); the subclass changes nothing but ``noisy``.
"""

from __future__ import annotations

from twisted.web.client import HTTPConnectionPool, _HTTP11ClientFactory


class _QuietClientFactory(_HTTP11ClientFactory):
    noisy = False


class QuietHTTPConnectionPool(HTTPConnectionPool):
    _factory = _QuietClientFactory
