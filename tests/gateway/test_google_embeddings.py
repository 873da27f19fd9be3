"""``:countTokens`` (unbilled) and the embedding actions (billed on input) through the
google-genai SDK, on a ``modelaction`` channel; other channel types cannot serve them."""

from __future__ import annotations

from google.genai import errors

from tests.gateway.test_google_sdk import GoogleCase
from tests.support.upstream_google import VECTOR


class ModelActionEmbeddingTests(GoogleCase):
    channel_type = "modelaction"

    async def test_count_tokens_is_forwarded_and_not_billed(self) -> None:
        await self.setup_google(upstream_model="gemini-real")
        client = self.google_client()
        counted = await self.in_thread(client.models.count_tokens, model="gemini-fake",
                                       contents="one two three")
        assert counted.total_tokens == 3
        assert self.fake.requests[-1].path == "/v1beta/models/gemini-real:countTokens"
        rows = await self.usage_rows()
        assert len(rows) == 1 and rows[0]["cost_nanos"] == 0
        assert await self.ledger_sum(self.user_id) == 0

    async def test_embed_content_is_billed_on_input(self) -> None:
        await self.setup_google(upstream_model="gemini-real")
        client = self.google_client()
        result = await self.in_thread(client.models.embed_content, model="gemini-fake",
                                      contents=["alpha beta", "gamma"])
        assert [e.values for e in result.embeddings] == [VECTOR]
        sent = self.fake.requests[-1]
        assert sent.path == "/v1beta/models/gemini-real:batchEmbedContents"
        assert [r["model"] for r in sent.body["requests"]] == ["models/gemini-real"]
        rows = await self.usage_rows()
        assert rows[0]["input_tokens"] >= 2 and rows[0]["output_tokens"] == 0
        assert rows[0]["cost_nanos"] > 0
        assert await self.ledger_sum(self.user_id) == -rows[0]["cost_nanos"]


class CompatChannelEmbeddingTests(GoogleCase):
    channel_type = "compat"

    async def test_count_tokens_on_compat_channel_is_400(self) -> None:
        await self.setup_google()
        client = self.google_client()
        with self.assertRaises(errors.ClientError) as caught:
            await self.in_thread(client.models.count_tokens, model="gemini-fake",
                                 contents="one two")
        assert caught.exception.code == 400
        assert self.fake.request_count == 0
