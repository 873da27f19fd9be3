"""``web_fetch`` (agents contract §2.7): fetch a URL from the device's own network and return
its readable text.

The body is read up to ``max_bytes`` through our own protocol so the connection is closed at
the cap (cancelling ``treq.collect`` would not close it); HTML is reduced to its visible text.
"""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlsplit

from treq.client import HTTPClient
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.internet.protocol import Protocol
from twisted.python.failure import Failure
from twisted.web.client import ResponseDone
from twisted.web.http_headers import Headers
from twisted.web.iweb import IResponse

from connector.actions.files import bounded_int, text_field
from connector.actions.outcome import ActionError, ActionResult

DEFAULT_BYTES = 120_000
MAX_BYTES = 1_000_000
TIMEOUT_SECONDS = 30
SKIPPED_TAGS = {"script", "style", "noscript", "template", "svg", "head"}
BLOCK_TAGS = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section",
              "article", "header", "footer", "pre", "table", "ul", "ol", "title"}


class _CappedBody(Protocol):
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.truncated = False
        self.done: Deferred[None] = Deferred()

    def dataReceived(self, data: bytes) -> None:
        room = self.limit - len(self.data)
        self.data += data[:room]
        if len(data) > room:
            self.truncated = True
            self.transport.stopProducing()  # type: ignore[union-attr]

    def connectionLost(self, reason: Failure = ResponseDone) -> None:  # type: ignore[assignment]
        if not self.done.called:
            self.done.callback(None)


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in SKIPPED_TAGS:
            self._skipping += 1
        elif tag in BLOCK_TAGS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in SKIPPED_TAGS and self._skipping:
            self._skipping -= 1
        elif tag in BLOCK_TAGS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)

    def text(self) -> str:
        lines = (" ".join(line.split()) for line in "".join(self.parts).splitlines())
        return "\n".join(line for line in lines if line)


def readable_text(body: str, content_type: str) -> str:
    """Visible text of an HTML page; other text as it is."""
    if "html" not in content_type.lower() and not body.lstrip()[:15].lower().startswith(
        ("<!doctype html", "<html")
    ):
        return body
    extractor = _TextExtractor()
    extractor.feed(body)
    extractor.close()
    return extractor.text()


async def web_fetch(
    http: HTTPClient, clock: IReactorTime, payload: dict[str, Any]
) -> ActionResult:
    url = text_field(payload, "url").strip()
    if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
        raise ActionError("url must be an absolute http or https URL")
    limit = bounded_int(payload, "max_bytes", DEFAULT_BYTES, MAX_BYTES)
    request = http.get(url, headers=Headers({b"User-Agent": [b"lockgate-connector"]}))
    timer = clock.callLater(TIMEOUT_SECONDS, request.cancel)
    try:
        response: IResponse = await request
        body = _CappedBody(limit)
        response.deliverBody(body)
        await body.done
    except Exception as exc:
        raise ActionError(f"fetch failed: {exc.__class__.__name__}: {exc}") from exc
    finally:
        if timer.active():
            timer.cancel()
    content_type = (response.headers.getRawHeaders("content-type") or [""])[0]
    text = readable_text(body.data.decode("utf-8", errors="replace"), content_type)
    if body.truncated:
        text += f"\n...(truncated at {limit} bytes)"
    header = f"URL: {url}\nStatus: {response.code}\n\n"
    if response.code >= 400:
        return ActionResult(False, result=header + text, error=f"HTTP status {response.code}")
    return ActionResult.ok(header + text)
