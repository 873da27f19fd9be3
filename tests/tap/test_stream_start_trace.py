"""The bench-only stream start trace: off unless ``LOCKGATE_STREAM_TRACE`` is set; on, it
records each /v1 request's marks with the reactor turn they happened in.

Off, it must cost nothing: no wrapper on the request, the lean client or the reactor.  On, it
wraps classes for the life of the process, so that case runs in a child process: a real
``LockgateSite`` on a loopback port, a /v1 request and a console request, the reactor
stopped, and the JSON it wrote read back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap

from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase

from gateway.channels.lean_connection import LeanConnection
from gateway.channels.lean_pool import LeanPool
from tap.http_request import LockgateRequest
from tap.stream_start_trace import ENV, MARKS, install

_CHILD = textwrap.dedent("""
    import socket, sys, threading
    from twisted.internet import reactor
    from twisted.web.resource import Resource
    from tap.http_channel import LockgateSite
    from tap.stream_start_trace import install

    class Answer(Resource):
        isLeaf = True
        def render(self, request):
            return b"ok"

    root = Resource()
    v1 = Resource()
    root.putChild(b"v1", v1)
    root.putChild(b"api", Answer())
    v1.putChild(b"x", Answer())
    install({"LOCKGATE_STREAM_TRACE": sys.argv[1]}, reactor)
    port = reactor.listenTCP(0, LockgateSite(root), interface="127.0.0.1").getHost().port

    def client():
        for path in (b"/v1/x", b"/api", b"/v1/x"):
            sock = socket.create_connection(("127.0.0.1", port), 10)
            sock.sendall(b"POST " + path + b" HTTP/1.1\\r\\nHost: x\\r\\n"
                         b"Content-Length: 2\\r\\n\\r\\nhi")
            while b"ok" not in sock.recv(4096):
                pass
            sock.close()
        reactor.callFromThread(reactor.stop)

    reactor.callWhenRunning(threading.Thread(target=client, daemon=True).start)
    reactor.run()
""")


class StreamStartTraceTests(TestCase):
    def test_without_the_variable_nothing_is_wrapped(self) -> None:
        clock = Clock()
        before = (LockgateRequest.requestReceived, LockgateRequest.render,
                  LockgateRequest.write, LockgateRequest.connectionLost, LeanPool._connect,
                  LeanConnection.start, LeanConnection.on_headers_complete)
        for environ in ({}, {ENV: ""}, {ENV: "  "}):
            self.assertIsNone(install(environ, clock))
        self.assertEqual((LockgateRequest.requestReceived, LockgateRequest.render,
                          LockgateRequest.write, LockgateRequest.connectionLost,
                          LeanPool._connect, LeanConnection.start,
                          LeanConnection.on_headers_complete), before)

    def test_on_it_records_each_v1_request_with_its_turns(self) -> None:
        directory = tempfile.mkdtemp(prefix="lockgate-stream-trace-")
        out = os.path.join(directory, "trace.json")
        child = subprocess.run([sys.executable, "-c", _CHILD, out], capture_output=True,
                               timeout=60, check=False,
                               cwd=os.path.dirname(os.path.dirname(os.path.dirname(
                                   os.path.abspath(__file__)))))
        assert child.returncode == 0, child.stderr.decode()
        with open(out) as handle:
            trace = json.load(handle)
        assert trace["marks"] == list(MARKS)
        assert len(trace["requests"]) == 2  # the two /v1 requests, not the console one
        for marks in trace["requests"]:
            assert sorted(marks) == sorted(MARKS), marks
            # answered inside the render: the first byte comes before the render returns
            order = ("received", "dispatched", "first_byte", "start_done")
            times = [marks[step][0] for step in order]
            turns = [marks[step][1] for step in order]
            assert times == sorted(times) and turns == sorted(turns), marks
            assert 0 < turns[0] <= trace["turns"]
        assert trace["upstream"] == []  # no upstream in this site
