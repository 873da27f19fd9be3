"""``POST /v1/uploads/images``: data URL back, nothing stored, nothing billed."""

from __future__ import annotations

import base64

from gateway.v1.multipart import Part, build
from tests.gateway.gateway_case import GatewayTestCase

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 64


class UploadImageTests(GatewayTestCase):
    async def upload(self, parts: list[Part], token: str | None = None):  # type: ignore[no-untyped-def]
        content_type, body = build(parts)
        headers = {"Content-Type": content_type.decode()}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return await self.call("POST", "/v1/uploads/images", data=body, headers=headers)

    async def test_png_becomes_data_url(self) -> None:
        await self.provision()
        result = await self.upload([Part("file", PNG, "in.png", "image/png")], self.api_key)
        assert result.status == 200, result
        body = result.json()
        assert body["content_type"] == "image/png" and body["bytes"] == len(PNG)
        assert body["url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()
        assert body["filename"] == "in.png"
        assert await self.usage_rows() == []
        assert self.fake.request_count == 0

    async def test_refusals(self) -> None:
        await self.provision()
        assert (await self.upload([Part("file", PNG, "in.png")])).status == 401
        missing = await self.upload([Part("other", b"x")], self.api_key)
        assert missing.status == 400 and "file" in missing.json()["error"]["message"]
        wrong = await self.upload([Part("file", b"%PDF-1.4", "doc.pdf", "application/pdf")],
                                  self.api_key)
        assert wrong.status == 400
        assert wrong.json()["error"]["message"].startswith("unsupported image type")
        big = await self.upload([Part("file", PNG + b"\0" * (20 * 1024 * 1024), "big.png")],
                                self.api_key)
        assert big.status == 413
