"""Usage extraction (contract §10.1-§10.2): any protocol's usage object -> ``Usage``.

Table-driven rather than one branch per provider: the key lists below say where each count may
live, and one set of rules (which input already contains cache tokens, clamping) applies to
all of them.  Also the reverse direction for the OpenAI family: ``Usage`` -> the chat or
Responses ``usage`` object a converted answer carries (§9.3).

Beyond §10.2: OpenAI's newer ``cache_write_tokens`` inside ``*_tokens_details`` counts as a
5-minute cache write already contained in the input (like ``cached_tokens``), when no
top-level write field is present; the encoders emit it too (current SDKs require it).

``extract_usage(protocol, payload)`` accepts either the usage object itself or a body/event
that wraps it (``usage``, ``response.usage``, ``message.usage``, ``usageMetadata``).  It returns
None when the payload holds no usable counts ("usage missing": the caller estimates instead).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

from gateway.billing.usage import Usage

_INPUT_KEYS = ("prompt_tokens", "input_tokens", "inputTokens")
_OUTPUT_KEYS = ("completion_tokens", "output_tokens", "outputTokens")
_INPUT_DETAILS = ("prompt_tokens_details", "input_tokens_details")
_OUTPUT_DETAILS = ("completion_tokens_details", "output_tokens_details")
_EXPLICIT_READ = ("cache_read_input_tokens",)
_DETAIL_READ = ("cached_tokens", "cached_input_tokens")
_WRITE_5M = ("cache_creation_input_tokens", "cache_write_input_tokens",
             "cache_creation_5m_input_tokens", "cache_write_5m_input_tokens")
_WRITE_1H = ("cache_creation_1h_input_tokens", "cache_write_1h_input_tokens")
_GOOGLE_PROTOCOLS = frozenset({"modelaction", "google"})
#: every top-level key ``_openai_style`` reads besides the input and output counts (and
#: ``total_tokens``, read only with cache fields): none present = the plain shape
_RARE_KEYS = frozenset((*_INPUT_DETAILS, *_OUTPUT_DETAILS, *_EXPLICIT_READ, *_DETAIL_READ,
                        *_WRITE_5M, *_WRITE_1H, "cache_creation", "image_input_tokens",
                        "audio_input_tokens", "image_output_tokens", "audio_output_tokens",
                        "reasoning_output_tokens"))


def _int(value: Any) -> int | None:
    if type(value) is int or value is None:  # the common cases first (not bool: no subclass)
        return value
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value == value and abs(value) < 2**62:
        return int(value)
    return None


def _first(obj: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[str, int] | None:
    # most keys are absent from a given usage object: only present ones are converted
    for key in keys:
        value = obj.get(key)
        if value is not None:
            value = _int(value)
            if value is not None:
                return key, value
    return None


def _value(obj: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    found = _first(obj, keys)
    return None if found is None else found[1]


def _is_mapping(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)``, a parsed JSON object (a dict) answered without the ABC
    check (several per answer on the request path)."""
    return type(value) is dict or isinstance(value, Mapping)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if type(value) is dict or isinstance(value, Mapping) else {}


def _unwrap(payload: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The usage object inside a body or stream event, or the payload itself."""
    for key in ("usage", "usageMetadata"):
        inner = payload.get(key)
        if type(inner) is dict or isinstance(inner, Mapping):
            return inner
        if key in payload and inner is None:
            return None
    for wrapper in ("response", "message"):
        inner = payload.get(wrapper)
        if type(inner) is dict or isinstance(inner, Mapping):
            found = _unwrap(inner)
            if found is not None:
                return found
    return payload


def extract_usage(protocol: str, payload: Mapping[str, Any]) -> Usage | None:
    """§10.2: normalised, clamped counts, or None when the payload reports no usage."""
    if type(payload) is not dict and not isinstance(payload, Mapping):
        return None
    usage = _unwrap(payload)
    if usage is None:
        return None
    if protocol in _GOOGLE_PROTOCOLS or "promptTokenCount" in usage:
        return _google(usage)
    return _openai_style(usage)


def _openai_style(usage: Mapping[str, Any]) -> Usage | None:
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if (type(prompt) is int and type(completion) is int and prompt >= 0 and completion >= 0
            and _RARE_KEYS.isdisjoint(usage)):
        # OpenAI's plain shape (most answers): the first input and output keys, both counts
        # already clamped -- what the rules below give, without walking the key lists
        return Usage(input=prompt, output=completion)
    found_in = _first(usage, _INPUT_KEYS)
    output = _value(usage, _OUTPUT_KEYS)
    if found_in is None or output is None:
        return None
    input_key, input_tokens = found_in
    if _RARE_KEYS.isdisjoint(usage):
        # the plain shape (e.g. prompt/completion/total): every rule below reads zero
        return Usage(input=input_tokens, output=output).clamped()
    # only the detail objects present (an absent one reads as empty in every rule below)
    in_details = [d for d in (usage.get(k) for k in _INPUT_DETAILS) if _is_mapping(d)]
    out_details = [d for d in (usage.get(k) for k in _OUTPUT_DETAILS) if _is_mapping(d)]

    explicit_read = _value(usage, _EXPLICIT_READ)
    detail_read = _value(usage, _DETAIL_READ)
    for details in in_details:
        if detail_read is None:
            detail_read = _value(details, _DETAIL_READ)

    creation = usage.get("cache_creation")
    split_5m = split_1h = None
    if _is_mapping(creation):
        split_5m = _int(creation.get("ephemeral_5m_input_tokens"))
        split_1h = _int(creation.get("ephemeral_1h_input_tokens"))
    if split_5m is not None or split_1h is not None:
        # Messages: cache_creation_input_tokens is the sum; the object splits it by lifetime
        write_5m, write_1h = split_5m, split_1h
    else:
        write_5m, write_1h = _value(usage, _WRITE_5M), _value(usage, _WRITE_1H)
    detail_write = None
    for details in in_details:
        if detail_write is None:
            detail_write = _int(details.get("cache_write_tokens"))

    cache_read = explicit_read if explicit_read is not None else (detail_read or 0)
    writes = (write_5m or 0) + (write_1h or 0)
    if explicit_read is not None or write_5m is not None or write_1h is not None:
        total = _int(usage.get("total_tokens"))
        if total is not None:
            includes_cache = total == input_tokens + output
        else:
            includes_cache = input_key == "prompt_tokens"
        if not includes_cache:
            input_tokens += (explicit_read or 0) + writes
    elif detail_write:
        # OpenAI's newer details field: already inside input, like cached_tokens
        write_5m = detail_write

    def detail(objs: list[Mapping[str, Any]], top: str, key: str) -> int:
        value = _int(usage.get(top))
        for obj in objs:
            if value is None:
                value = _int(obj.get(key))
        return value or 0

    return Usage(
        input=input_tokens,
        output=output,
        cache_read=cache_read,
        cache_write_5m=write_5m or 0,
        cache_write_1h=write_1h or 0,
        image_in=detail(in_details, "image_input_tokens", "image_tokens"),
        audio_in=detail(in_details, "audio_input_tokens", "audio_tokens"),
        image_out=detail(out_details, "image_output_tokens", "image_tokens"),
        audio_out=detail(out_details, "audio_output_tokens", "audio_tokens"),
        reasoning=detail(out_details, "reasoning_output_tokens", "reasoning_tokens"),
    ).clamped()


def merge_usage_objects(earlier: Mapping[str, Any], later: Mapping[str, Any]) -> dict[str, Any]:
    """One usage object from two partial stream reports (Messages: ``message_start`` then
    ``message_delta``, whose ``output_tokens`` is cumulative): later non-null values win."""
    merged = dict(earlier)
    merged.update((key, value) for key, value in later.items() if value is not None)
    return merged


def _modality_counts(details: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    if isinstance(details, list):
        for item in details:
            item = _mapping(item)
            modality = item.get("modality")
            count = _int(item.get("tokenCount"))
            if isinstance(modality, str) and count is not None:
                counts[modality.upper()] = counts.get(modality.upper(), 0) + count
    return counts


def _google(usage: Mapping[str, Any]) -> Usage | None:
    prompt = _int(usage.get("promptTokenCount"))
    if prompt is None:
        return None
    candidates = _int(usage.get("candidatesTokenCount"))
    thoughts = _int(usage.get("thoughtsTokenCount")) or 0
    tool_prompt = _int(usage.get("toolUsePromptTokenCount")) or 0
    if candidates is None:
        if _int(usage.get("totalTokenCount")) is None:
            return None
        candidates = 0  # an empty answer: Google omits the zero count
    prompt_modalities = _modality_counts(usage.get("promptTokensDetails"))
    output_modalities = _modality_counts(usage.get("candidatesTokensDetails"))
    return Usage(
        input=prompt + tool_prompt,
        output=candidates + thoughts,
        cache_read=_int(usage.get("cachedContentTokenCount")) or 0,
        image_in=prompt_modalities.get("IMAGE", 0),
        audio_in=prompt_modalities.get("AUDIO", 0),
        image_out=output_modalities.get("IMAGE", 0),
        audio_out=output_modalities.get("AUDIO", 0),
        reasoning=thoughts,
    ).clamped()


def chat_usage(usage: Usage) -> dict[str, Any]:
    """``Usage`` as a chat-completions ``usage`` object (§9.3)."""
    body: dict[str, Any] = {
        "prompt_tokens": usage.input,
        "completion_tokens": usage.output,
        "total_tokens": usage.total,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read,
                                  "cache_write_tokens": usage.cache_write_5m
                                  + usage.cache_write_1h,
                                  "audio_tokens": usage.audio_in,
                                  "image_tokens": usage.image_in},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning,
                                      "audio_tokens": usage.audio_out,
                                      "image_tokens": usage.image_out},
    }
    if usage.cache_write_5m:
        body["cache_creation_input_tokens"] = usage.cache_write_5m
    if usage.cache_write_1h:
        body["cache_creation_1h_input_tokens"] = usage.cache_write_1h
    return body


def responses_usage(usage: Usage) -> dict[str, Any]:
    """``Usage`` as a Responses ``usage`` object (§9.3)."""
    body: dict[str, Any] = {
        "input_tokens": usage.input,
        "input_tokens_details": {"cached_tokens": usage.cache_read,
                                 "cache_write_tokens": usage.cache_write_5m
                                 + usage.cache_write_1h,
                                 "audio_tokens": usage.audio_in,
                                 "image_tokens": usage.image_in},
        "output_tokens": usage.output,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning,
                                  "audio_tokens": usage.audio_out,
                                  "image_tokens": usage.image_out},
        "total_tokens": usage.total,
    }
    if usage.cache_write_5m:
        body["cache_creation_input_tokens"] = usage.cache_write_5m
    if usage.cache_write_1h:
        body["cache_creation_1h_input_tokens"] = usage.cache_write_1h
    return body
