"""The bare Twisted + treq proxy: the reference Lockgate's CPU per request is compared with.

What a Python operator could write in an afternoon instead of running a gateway: one bearer key
checked against a constant, ``json.loads`` of the body (a proxy that routes on the model has to
read it), one ``treq.request`` over a persistent ``HTTPConnectionPool`` to a single upstream,
and the answer relayed back -- a whole body with its length, a stream chunk by chunk as it
arrives.  Its access log is twisted.web's own (one combined-format line per request, written to
``--access-log``, as Lockgate's goes to a real file under the bench).  No limits, routing or
billing.  Issue 22 sets Lockgate's target against this column (CPU per request <= 0.8x of it,
with everything on), measured in the same run.

Like most such proxies it cancels an upstream request when the client hangs up before the
answer's head, but keeps reading a stream whose client left (cancelling ``treq.collect`` does
not close the connection, DESIGN.md): its slow-stream "upstream fds after hang-up" figure
shows that.

    python bench/treq_proxy.py --port 9300 --upstream http://127.0.0.1:9100 --key sk-bench \
        [--access-log /tmp/treq-access.log]
"""

from __future__ import annotations

import argparse
import hmac
import json
from typing import Any

from twisted.internet import epollreactor

epollreactor.install()

import treq  # noqa: E402
from twisted.internet.defer import Deferred  # noqa: E402
from twisted.internet.task import react  # noqa: E402
from twisted.python.failure import Failure  # noqa: E402
from twisted.web.client import HTTPConnectionPool  # noqa: E402
from twisted.web.resource import Resource  # noqa: E402
from twisted.web.server import NOT_DONE_YET, Site  # noqa: E402

UNAUTHORIZED = b'{"error": {"message": "invalid api key", "type": "invalid_request_error"}}'
BAD_JSON = b'{"error": {"message": "body is not JSON", "type": "invalid_request_error"}}'
BAD_GATEWAY = b'{"error": {"message": "upstream failed", "type": "upstream_error"}}'


class TreqProxy(Resource):
    """``POST`` anything: check the key, parse the body, relay it to the upstream."""

    isLeaf = True

    def __init__(self, reactor: Any, pool: HTTPConnectionPool, upstream: bytes,
                 key: bytes) -> None:
        super().__init__()
        self.reactor = reactor
        self.pool = pool
        self.upstream = upstream
        self.expected = b"Bearer " + key

    def render_POST(self, request: Any) -> Any:
        if not hmac.compare_digest(request.getHeader(b"authorization") or b"", self.expected):
            return self.refuse(request, 401, UNAUTHORIZED)
        body = request.content.read()
        try:
            stream = json.loads(body).get("stream") is True
        except (ValueError, AttributeError):
            return self.refuse(request, 400, BAD_JSON)
        sent = treq.request("POST", self.upstream + request.path, data=body,
                            headers={b"content-type": [b"application/json"]},
                            pool=self.pool, reactor=self.reactor)
        request.notifyFinish().addErrback(lambda _: sent.cancel())
        sent.addCallback(self.relay, request, stream)
        sent.addErrback(self.failed, request)
        return NOT_DONE_YET

    @staticmethod
    def refuse(request: Any, code: int, body: bytes) -> bytes:
        request.setResponseCode(code)
        request.setHeader(b"content-type", b"application/json")
        return body

    def relay(self, response: Any, request: Any, stream: bool) -> Deferred[None]:
        request.setResponseCode(response.code)
        kind = response.headers.getRawHeaders(b"content-type", [b"application/json"])[0]
        request.setHeader(b"content-type", kind)
        if stream:
            request.setHeader(b"cache-control", b"no-cache")
            done = treq.collect(response, request.write)
            return done.addCallback(lambda _: self.finish(request))

        def whole(data: bytes) -> None:
            request.setHeader(b"content-length", b"%d" % len(data))
            request.write(data)
            self.finish(request)

        return treq.content(response).addCallback(whole)

    @staticmethod
    def finish(request: Any) -> None:
        if request.channel is not None and not request.finished:
            request.finish()

    def failed(self, failure: Failure, request: Any) -> None:
        if request.channel is None or request.finished:
            return
        if not request.startedWriting:
            request.setResponseCode(502)
            request.setHeader(b"content-type", b"application/json")
            request.write(BAD_GATEWAY)
        request.finish()


def serve(reactor: Any, args: argparse.Namespace) -> Deferred[None]:
    pool = HTTPConnectionPool(reactor, persistent=True)
    pool.maxPersistentPerHost = 4096
    pool.retryAutomatically = False
    site = Site(TreqProxy(reactor, pool, args.upstream.rstrip("/").encode(),
                          args.key.encode()), logPath=args.access_log)
    site.noisy = False
    reactor.listenTCP(args.port, site, backlog=4096, interface="127.0.0.1")
    return Deferred()  # serve until killed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--key", required=True, help="the one bearer key accepted")
    parser.add_argument("--access-log", default=None,
                        help="file for twisted.web's access log (default: the log system)")
    args = parser.parse_args()
    react(serve, [args])


if __name__ == "__main__":
    main()
