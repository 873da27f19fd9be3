"""The web console served by Lockgate's own Site (web console contract W1-W6, §1).

Real HTTP on a loopback port against the real root resource: console paths answer the built
``index.html`` with the exact CSP and no-cache; hashed assets are immutable, typed, gzipped for
clients that accept it, and 404 (never HTML) when absent; the API prefixes keep their JSON 404.
"""

from __future__ import annotations

import gzip
import re

from twisted.internet import reactor
from twisted.web.client import Agent, readBody
from twisted.web.http_headers import Headers

from console.web.build import DIST
from tests.support.app import AppTestCase

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: https:; "
       "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'self'; "
       "form-action 'self'; frame-ancestors 'none'")
def index_html() -> bytes:
    return (DIST / "index.html").read_bytes()


def asset_paths() -> list[str]:
    return re.findall(r'(?:src|href)="(/assets/[^"]+)"', index_html().decode())


class ConsolePageTests(AppTestCase):
    async def test_console_paths_answer_index_html(self) -> None:
        for path in ("/", "/login", "/setup", "/keys", "/admin/channels", "/dashboard?x=1",
                     "/some/deep/unknown/page", "/nope"):
            response = await self.call("GET", path)
            assert response.status == 200, (path, response)
            assert response.body == index_html(), path
            assert response.header("Content-Type") == "text/html; charset=utf-8"
            assert response.header("Cache-Control") == "no-cache"
            assert response.header("Content-Security-Policy") == CSP
            assert response.header("X-Content-Type-Options") == "nosniff"
            assert response.header("Referrer-Policy") == "same-origin"

    async def test_index_has_no_inline_script_or_remote_host(self) -> None:
        html = index_html().decode()
        scripts = re.findall(r"<script([^>]*)>(.*?)</script>", html, re.S)
        assert scripts, html
        for attributes, body in scripts:
            assert 'src="/assets/' in attributes and body.strip() == "", attributes
        assert not re.search(r"\son[a-z]+=", html)
        assert "http://" not in html and "https://" not in html
        assert "style=" not in html

    async def test_api_prefixes_keep_their_json_404(self) -> None:
        for path in ("/api/nope", "/auth/nope", "/api", "/assets", "/assets/", "/metrics"):
            response = await self.call("GET", path)
            assert response.status == 404, (path, response)
            assert "text/html" not in (response.header("Content-Type") or ""), path
        document = await self.call("GET", "/openapi.json")
        assert document.status == 200 and document.header("Content-Type") == "application/json"
        v1 = await self.call("GET", "/v1/nope")
        assert v1.status == 404 and v1.header("Content-Type") == "application/json"

    async def test_other_methods_on_console_paths_are_json_404(self) -> None:
        for method in ("POST", "PUT", "DELETE"):
            response = await self.call(method, "/keys")
            assert response.status == 404, (method, response)
            assert response.json() == {"error": "Not found", "type": "not_found"}

    async def test_captcha_host_joins_the_policy_only_while_enabled(self) -> None:
        await self.ctx.live_settings.save({"password_hcaptcha_enabled": "true"}, self.ctx.now())
        policy = (await self.call("GET", "/login")).header("Content-Security-Policy") or ""
        directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
        assert "https://hcaptcha.com" in directives["script-src"]
        assert "https://hcaptcha.com" in directives["frame-src"]
        assert "'unsafe-inline'" not in policy and "'unsafe-eval'" not in policy
        await self.ctx.live_settings.save({"password_hcaptcha_enabled": "false"}, self.ctx.now())
        assert (await self.call("GET", "/login")).header("Content-Security-Policy") == CSP


class AssetTests(AppTestCase):
    async def test_built_assets_are_immutable_and_typed(self) -> None:
        paths = asset_paths()
        assert any(p.endswith(".js") for p in paths) and any(p.endswith(".css") for p in paths)
        for path in paths:
            response = await self.call("GET", path)
            assert response.status == 200, (path, response)
            assert response.body == (DIST / path.lstrip("/")).read_bytes()
            assert response.header("Cache-Control") == "public, max-age=31536000, immutable"
            assert response.header("X-Content-Type-Options") == "nosniff"
            expected = "text/javascript" if path.endswith(".js") else "text/css"
            assert (response.header("Content-Type") or "").startswith(expected), path
            assert re.search(r"-[A-Za-z0-9_-]{8,}\.(js|css)$", path), path

    async def raw_get(self, path: str, encoding: str) -> tuple[Headers, bytes]:
        """A GET with no client-side decoding (treq would undo the gzip)."""
        agent = Agent(reactor, pool=self.pool)
        response = await agent.request(b"GET", (self.base + path).encode(),
                                       Headers({b"accept-encoding": [encoding.encode()]}))
        return response.headers, await readBody(response)

    async def test_gzip_for_clients_that_accept_it(self) -> None:
        for path in [p for p in asset_paths() if p.endswith(".js")] + ["/login"]:
            plain_headers, plain = await self.raw_get(path, "identity")
            headers, packed = await self.raw_get(path, "gzip, br")
            refused_headers, _ = await self.raw_get(path, "gzip;q=0")
            assert not plain_headers.hasHeader(b"content-encoding")
            assert not refused_headers.hasHeader(b"content-encoding")
            assert headers.getRawHeaders(b"content-encoding") == [b"gzip"], path
            assert headers.getRawHeaders(b"vary") == [b"Accept-Encoding"]
            assert gzip.decompress(packed) == plain
            assert len(packed) < len(plain) * 0.8, path

    async def test_missing_asset_is_404_never_html(self) -> None:
        for path in ("/assets/index-00000000.js", "/assets/../index.html",
                     "/assets/nested/file.js", "/assets/%2e%2e%2fsetup.cfg"):
            response = await self.call("GET", path)
            assert response.status == 404, (path, response)
            assert "text/html" not in (response.header("Content-Type") or ""), path
            assert b"<html" not in response.body
        script = next(p for p in asset_paths() if p.endswith(".js"))
        extra = await self.call("GET", script + "/extra")
        assert extra.status == 404
