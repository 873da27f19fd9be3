"""A bare relay built only from Lockgate's streaming parts: the floor for the /v1 path.

No authentication, routing, limits or billing: ``POST /v1/...`` is forwarded to one upstream
with ``gateway.channels.http.UpstreamClient``; JSON bodies with ``read_all``, streams through
``StreamWriter`` + ``EventRelay`` (parse every event, re-encode it).  Comparing it with the
direct figures shows what the relay machinery costs; comparing Lockgate with it shows what the
rest of the pipeline costs.

    python bench/relay_floor.py --port 9200 --upstream http://127.0.0.1:9100
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from twisted.internet import epollreactor

epollreactor.install()

import orjson  # noqa: E402
from twisted.internet.defer import Deferred  # noqa: E402
from twisted.internet.task import react  # noqa: E402
from twisted.python.failure import Failure  # noqa: E402
from twisted.web.resource import Resource  # noqa: E402
from twisted.web.server import NOT_DONE_YET, Site  # noqa: E402

from gateway.channels.http import UpstreamClient, UpstreamResponse  # noqa: E402
from gateway.channels.relay import EventRelay, StreamWriter  # noqa: E402
from gateway.protocols.sse import SSEEvent, encode_event  # noqa: E402

JSON = {b"content-type": [b"application/json"]}


def passthrough(event: SSEEvent) -> bytes:
    return encode_event(event.data, event.event)


class Relay(Resource):
    isLeaf = True

    def __init__(self, reactor: Any, client: UpstreamClient, upstream: bytes) -> None:
        super().__init__()
        self.reactor = reactor
        self.client = client
        self.upstream = upstream

    def render_POST(self, request: Any) -> Any:
        body = request.content.read()
        try:
            stream = orjson.loads(body).get("stream") is True
        except (orjson.JSONDecodeError, AttributeError):
            request.setResponseCode(400)
            return b'{"error": "bad json"}'
        writer = StreamWriter(request, self.reactor) if stream else None
        sent = self.client.request(b"POST", self.upstream + request.path, JSON, body,
                                   first_byte_timeout=30)
        request.notifyFinish().addErrback(lambda _: sent.cancel())
        sent.addCallback(self.answer, request, writer)
        sent.addErrback(self.failed, request, writer)
        return NOT_DONE_YET

    def answer(self, response: UpstreamResponse, request: Any,
               writer: StreamWriter | None) -> Any:
        if writer is None or response.code != 200:
            done = response.read_all(16 << 20)

            def send(data: bytes) -> None:
                if request.channel is None:
                    return
                request.setResponseCode(response.code)
                request.setHeader(b"content-type", response.header(b"content-type")
                                  or b"application/json")
                request.setHeader(b"content-length", b"%d" % len(data))
                request.write(data)
                request.finish()

            return done.addCallback(send)
        writer.set_response(200, [(b"content-type", b"text/event-stream"),
                                  (b"cache-control", b"no-cache")])
        relay = EventRelay(writer, response, passthrough)
        response.deliver(relay, idle_timeout=300)
        relay.done.addBoth(lambda _: writer.finish())
        return None

    def failed(self, failure: Failure, request: Any, writer: StreamWriter | None) -> None:
        if request.channel is None or (writer is not None and writer.started):
            return
        request.setResponseCode(502)
        request.write(b'{"error": "upstream failed"}')
        request.finish()


def serve(reactor: Any, args: argparse.Namespace) -> Deferred[None]:
    client = UpstreamClient(reactor, max_persistent_per_host=4096)
    site = Site(Relay(reactor, client, args.upstream.rstrip("/").encode()))
    site.noisy = False
    reactor.listenTCP(args.port, site, backlog=4096, interface="127.0.0.1")
    return Deferred()  # serve until killed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    args = parser.parse_args()
    react(serve, [args])


if __name__ == "__main__":
    main()
