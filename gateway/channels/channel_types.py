"""One spelling per channel type and routing algorithm, so routing and the console agree.

Gateway contract §6.1: matching ignores case and spaces and treats ``-`` and ``_`` alike; a few
aliases name the same protocol family; anything unrecognised behaves as ``compat``.  Routing
algorithm aliases follow console contract §5.6 (unknown -> ``priority``).  Pure.
"""

from __future__ import annotations

COMPAT = "compat"
RESPONSES = "responses"
COMPAT_VIDEO = "compat-video"
IMGVIDEO = "imgvideo"
MESSAGES = "messages"
MODELACTION = "modelaction"
ARTJOB = "artjob"

CANONICAL = (COMPAT, RESPONSES, COMPAT_VIDEO, IMGVIDEO, MESSAGES, MODELACTION, ARTJOB)
PLUGIN_PREFIX = "plugin:"

_ALIASES = {
    "compat": COMPAT,
    "chat": COMPAT,
    "responses": RESPONSES,
    "response": RESPONSES,
    "compat-responses": RESPONSES,
    "compat-response": RESPONSES,
    "compat-video": COMPAT_VIDEO,
    "compatvideo": COMPAT_VIDEO,
    "video": COMPAT_VIDEO,
    "imgvideo": IMGVIDEO,
    "img-video": IMGVIDEO,
    "image2video": IMGVIDEO,
    "messages": MESSAGES,
    "message": MESSAGES,
    "modelaction": MODELACTION,
    "model-action": MODELACTION,
    "artjob": ARTJOB,
    "art-job": ARTJOB,
}


def type_key(value: str) -> str:
    """The matching form: lower case, no whitespace, ``_`` read as ``-``."""
    return "".join(value.split()).lower().replace("_", "-")


#: value -> canonical type: every /v1 attempt asks for its channel's type, and a gateway has
#: a handful of channel types (the bound only guards against a misconfiguration)
_NORMALISED: dict[str, str] = {}


def normalise_channel_type(value: str) -> str:
    """The canonical type for ``value``; ``plugin:<id>`` is kept (lower-cased) for the caller
    to accept or refuse; unknown and empty values become ``compat``."""
    known = _NORMALISED.get(value)
    if known is not None:
        return known
    key = type_key(value)
    if key.startswith(PLUGIN_PREFIX) and len(key) > len(PLUGIN_PREFIX):
        canonical = key
    else:
        canonical = _ALIASES.get(key, COMPAT)
    if len(_NORMALISED) < 1024:
        _NORMALISED[value] = canonical
    return canonical


PRIORITY = "priority"
ROUND_ROBIN = "round_robin"
WEIGHTED_ROUND_ROBIN = "weighted_round_robin"

_ALGORITHMS = {
    "round_robin": ROUND_ROBIN,
    "roundrobin": ROUND_ROBIN,
    "rr": ROUND_ROBIN,
    "weighted_round_robin": WEIGHTED_ROUND_ROBIN,
    "weighted": WEIGHTED_ROUND_ROBIN,
    "weighted_roundrobin": WEIGHTED_ROUND_ROBIN,
    "wrr": WEIGHTED_ROUND_ROBIN,
}


def normalise_routing_algorithm(value: str) -> str:
    """A user channel's routing algorithm (console contract §5.6); unknown -> ``priority``."""
    key = "".join(value.split()).lower().replace("-", "_")
    return _ALGORITHMS.get(key, PRIORITY)
