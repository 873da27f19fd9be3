"""The official ``openai`` SDK on completions, responses, moderations, audio and images."""

from __future__ import annotations

import io

from tests.gateway.gateway_case import GatewayTestCase


class OpenAISDKOtherRouteTests(GatewayTestCase):
    async def test_completions(self) -> None:
        await self.provision()
        client = self.openai_client()
        reply = await self.in_thread(client.completions.create, model="gpt-fake",
                                     prompt="say something")
        assert reply.object == "text_completion"
        assert reply.choices[0].text
        rows = await self.usage_rows()
        assert rows[0]["endpoint"] == "/v1/completions" and rows[0]["cost_nanos"] > 0

    async def test_responses_plain_on_compat_channel_is_translated(self) -> None:
        await self.provision()
        client = self.openai_client()
        reply = await self.in_thread(client.responses.create, model="gpt-fake",
                                     input="hello there")
        assert reply.output_text == "tok0 tok1 tok2 "
        assert reply.usage.output_tokens == 3
        assert self.fake.requests[0].path == "/v1/chat/completions"

    async def test_responses_streamed_on_compat_channel(self) -> None:
        await self.provision()
        client = self.openai_client()

        def run() -> list:
            return list(client.responses.create(model="gpt-fake", input="hi", stream=True))

        events = await self.in_thread(run)
        types = [e.type for e in events]
        assert types[0] == "response.created" and types[-1] == "response.completed"
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        assert text == "tok0 tok1 tok2 "
        rows = await self.usage_rows()
        assert rows[0]["output_tokens"] == 3 and rows[0]["is_stream"]

    async def test_chat_on_responses_channel_is_translated(self) -> None:
        await self.provision(channel_type="responses")
        client = self.openai_client()
        reply = await self.in_thread(client.chat.completions.create, model="gpt-fake",
                                     messages=[{"role": "user", "content": "hello"}])
        assert reply.choices[0].message.content == "tok0 tok1 tok2 "
        assert self.fake.requests[0].path == "/v1/responses"

        def run() -> list:
            return list(client.chat.completions.create(
                model="gpt-fake", messages=[{"role": "user", "content": "hello"}],
                stream=True))

        chunks = await self.in_thread(run)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == "tok0 tok1 tok2 "

    async def test_moderations(self) -> None:
        await self.provision(model="omni-moderation-latest")
        client = self.openai_client()
        reply = await self.in_thread(client.moderations.create, input="be nice")
        assert reply.results is not None
        assert self.fake.requests[0].body["model"] == "omni-moderation-latest"
        rows = await self.usage_rows()
        assert rows[0]["endpoint"] == "/v1/moderations"

    async def test_audio_speech_streams_binary(self) -> None:
        await self.provision(model="tts-1", upstream_model="tts-real")
        client = self.openai_client()

        def run() -> bytes:
            return client.audio.speech.create(model="tts-1", voice="alloy",
                                              input="hello world").read()

        audio = await self.in_thread(run)
        assert len(audio) > 0
        assert self.fake.requests[0].body["model"] == "tts-real"
        rows = await self.usage_rows()
        assert rows[0]["output_tokens"] >= 1

    async def test_audio_transcription_multipart(self) -> None:
        await self.provision(model="whisper-1", upstream_model="whisper-real")
        client = self.openai_client()
        upload = io.BytesIO(b"RIFF" + b"\0" * 5000)
        upload.name = "clip.wav"
        reply = await self.in_thread(client.audio.transcriptions.create, model="whisper-1",
                                     file=upload)
        assert reply.text
        sent = self.fake.requests[0]
        assert sent.path == "/v1/audio/transcriptions"
        rows = await self.usage_rows()
        assert rows[0]["input_tokens"] >= 5

    async def test_images_generate_and_edit(self) -> None:
        await self.provision(model="img-1")
        client = self.openai_client()
        reply = await self.in_thread(client.images.generate, model="img-1", prompt="a cat")
        assert reply.data
        image = io.BytesIO(b"\x89PNG\r\n\x1a\n" + b"\0" * 100)
        image.name = "cat.png"
        edited = await self.in_thread(client.images.edit, model="img-1", image=image,
                                      prompt="add a hat")
        assert edited.data
        rows = await self.usage_rows()
        assert [r["endpoint"] for r in rows] == ["/v1/images/generations", "/v1/images/edits"]
