"""``parse_client_request``: a client body -> ``ClientRequest`` (pipeline step 5-6, §2, §8.1).

The one place that turns the raw body of a text route into what the rest of the pipeline
needs -- model name, stream flag, whether usage was asked for in the stream, the output cap
and an input estimate for the reservation -- and refuses malformed input with a 400
``ProtocolError`` before anything is reserved or sent upstream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.protocols import chat, completions, fields, responses
from gateway.protocols.errors import ProtocolError

CHAT = "chat"
COMPLETIONS = "completions"
RESPONSES = "responses"
FAMILIES = (CHAT, COMPLETIONS, RESPONSES)


@dataclass(frozen=True, slots=True)
class ClientRequest:
    """A validated text request: what routing, reservation and translation need to know."""

    family: str
    #: the model name the client asked for (trimmed; ``models/`` prefix left to routing)
    model: str
    stream: bool
    #: chat/completions: ``stream_options.include_usage``; Responses always gets usage
    wants_usage_in_stream: bool
    max_output_tokens: int | None
    estimated_input_tokens: int
    #: the parsed body (do not mutate: translators copy before changing it)
    body: dict[str, Any]
    #: the body bytes as received
    raw: bytes


def parse_client_request(family: str, body: bytes) -> ClientRequest:
    """Validate a text-route body of ``family`` (chat, completions, responses)."""
    parsed = fields.parse_object(body)
    model = fields.model_name(parsed)
    if family == CHAT:
        stream, wants_usage, max_output, estimate = chat.read_request(parsed)
    elif family == COMPLETIONS:
        stream, wants_usage, max_output, estimate = completions.read_request(parsed)
    elif family == RESPONSES:
        stream, max_output, estimate = responses.read_request(parsed)
        wants_usage = True
    else:
        raise ProtocolError(400, f"unsupported request family: {family}")
    return ClientRequest(family, model, stream, wants_usage, max_output, estimate, parsed, body)
