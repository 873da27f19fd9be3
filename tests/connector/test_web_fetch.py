"""``web_fetch`` against a real loopback HTTP server: readable text from HTML, the byte cap,
error statuses, and URLs that are not http(s)."""

from __future__ import annotations

from twisted.internet import reactor
from twisted.trial.unittest import TestCase
from twisted.web.resource import Resource
from twisted.web.server import Site

from tests.connector.runner_support import device_runner

PAGE = b"""<!doctype html><html><head><title>T</title><style>p{}</style>
<script>var secret = 1;</script></head><body><h1>Hello</h1><p>First  paragraph
with &amp; entity.</p><div>Second</div></body></html>"""


class Page(Resource):
    isLeaf = True

    def render_GET(self, request):
        if request.path == b"/page":
            request.setHeader(b"content-type", b"text/html; charset=utf-8")
            return PAGE
        if request.path == b"/big":
            request.setHeader(b"content-type", b"text/plain")
            return b"y" * 500_000
        request.setResponseCode(404)
        return b"missing"


class WebFetchTests(TestCase):
    def setUp(self) -> None:
        self.port = reactor.listenTCP(0, Site(Page()), interface="127.0.0.1")
        self.addCleanup(self.port.stopListening)
        self.base = f"http://127.0.0.1:{self.port.getHost().port}"
        self.runner = device_runner(self, "/")

    def fetch(self, **payload):
        return self.runner.start({"id": "w", "action": "web_fetch", "payload": payload}, None)

    async def test_html_becomes_readable_text(self) -> None:
        result = await self.fetch(url=self.base + "/page")
        self.assertTrue(result.success, result)
        self.assertEqual(
            result.result,
            f"URL: {self.base}/page\nStatus: 200\n\nHello\nFirst paragraph\nwith & entity.\nSecond",
        )

    async def test_body_is_capped(self) -> None:
        result = await self.fetch(url=self.base + "/big", max_bytes=1000)
        body = result.result.split("\n\n", 1)[1]
        self.assertEqual(body, "y" * 1000 + "\n...(truncated at 1000 bytes)")

    async def test_error_status_fails_with_the_body(self) -> None:
        result = await self.fetch(url=self.base + "/nope")
        self.assertFalse(result.success)
        self.assertEqual(result.error, "HTTP status 404")
        self.assertTrue(result.result.endswith("missing"))

    async def test_only_http_urls(self) -> None:
        for url in ("file:///etc/passwd", "ftp://x/y", "http://", "not a url"):
            result = await self.fetch(url=url)
            self.assertEqual(result.error, "url must be an absolute http or https URL", url)
        result = await self.fetch()
        self.assertEqual(result.error, "url is required")
