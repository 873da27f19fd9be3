"""A slow OpenAI-compatible upstream in its own thread, for tests that drive real processes.

The tests that SIGTERM a ``twistd -n lockgate`` subprocess block on sockets while the process
drains, so this upstream cannot share the test's reactor: it is a stdlib
``ThreadingHTTPServer`` on a loopback port.  ``POST /v1/chat/completions`` answers

- streamed (``"stream": true``): ``chunks`` content chunks ``"tok{i} "``, ``pace`` seconds apart,
  then a usage chunk (``prompt_tokens`` = ``PROMPT_TOKENS``, ``completion_tokens`` = chunks)
  and ``data: [DONE]``;
- plain: after ``pace * chunks`` seconds, one answer with the same content and usage.

``requests`` counts the calls that reached it.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PROMPT_TOKENS = 7


class SlowUpstream:
    def __init__(self, *, chunks: int = 6, pace: float = 0.5) -> None:
        self.chunks = chunks
        self.pace = pace
        self.requests = 0
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with owner._lock:
                    owner.requests += 1
                try:
                    if body.get("stream"):
                        owner._stream(self, body)
                    else:
                        owner._plain(self, body)
                except OSError:
                    pass  # the gateway closed the connection (a cut stream)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _usage(self) -> dict[str, int]:
        return {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": self.chunks,
                "total_tokens": PROMPT_TOKENS + self.chunks}

    def _plain(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        time.sleep(self.pace * self.chunks)
        text = "".join(f"tok{i} " for i in range(self.chunks))
        payload = json.dumps({
            "id": "chatcmpl-slow", "object": "chat.completion", "created": 1,
            "model": body.get("model", ""),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": self._usage()}).encode()
        handler.send_response(200)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def _stream(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.send_header("connection", "close")
        handler.end_headers()
        handler.close_connection = True
        base = {"id": "chatcmpl-slow", "object": "chat.completion.chunk", "created": 1,
                "model": body.get("model", "")}

        def send(data: Any) -> None:
            text = data if isinstance(data, str) else json.dumps(data)
            handler.wfile.write(f"data: {text}\n\n".encode())
            handler.wfile.flush()

        for i in range(self.chunks):
            send({**base, "choices": [{"index": 0, "delta": {"content": f"tok{i} "},
                                       "finish_reason": None}]})
            time.sleep(self.pace)
        send({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        send({**base, "choices": [], "usage": self._usage()})
        send("[DONE]")
