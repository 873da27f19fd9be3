"""Pure translators between the text protocols clients speak and the ones channels speak.

Public interface (the gateway pipeline calls only these):

- ``parse_client_request(family, body) -> ClientRequest`` -- family ``chat``, ``completions``
  or ``responses``; raises ``ProtocolError(status, message, type, param)`` (400) on bad input.
- ``make_translator(client_family, channel_type, request, upstream_model) -> Translator`` --
  raises ``ProtocolError`` (400) for a pair not served or a request the channel cannot express.
  See ``translate.py`` for the Translator methods and the order the pipeline calls them in.
- ``extract_usage(protocol, payload) -> Usage | None`` -- contract §10.2 for any protocol.
- ``estimate_tokens(text)`` / ``estimate_texts(texts)`` -- the fallback heuristic (§10.3).
- ``UpstreamFormatError`` -- an upstream answer we cannot read (the pipeline answers 502).

Layout: ``events`` (neutral stream events and ``Reply``) and ``conversation`` (neutral request)
are the shared vocabulary; ``chat``/``responses``/``completions`` the formats;
``chat_stream``/``responses_stream`` their stream codecs; ``passthrough`` the same-format
translators; ``convert`` the generic converting translator; ``translate`` the pairing.
No I/O anywhere in this package.
"""

from gateway.protocols.errors import ProtocolError, UpstreamFormatError
from gateway.protocols.estimate import estimate_texts, estimate_tokens
from gateway.protocols.request import ClientRequest, parse_client_request
from gateway.protocols.translate import Translator, make_translator
from gateway.protocols.usage import extract_usage

__all__ = [
    "ClientRequest",
    "ProtocolError",
    "Translator",
    "UpstreamFormatError",
    "estimate_texts",
    "estimate_tokens",
    "extract_usage",
    "make_translator",
    "parse_client_request",
]
