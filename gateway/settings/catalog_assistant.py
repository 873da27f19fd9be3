"""The assistant chat's ``advanced_chat_*`` keys (agents contract §1.1), known to the catalog.

They are written only by ``PUT /api/advanced-chat/settings``, which checks a whole body with
``gateway.assistant.admin_settings`` first.  Marking them ``internal`` keeps the generic
settings routes from showing or accepting them (that route has its own rules) and lets a
configuration import skip the rows an export carries instead of refusing them as unknown.
"""

from __future__ import annotations

from gateway.assistant.admin_settings import FIELDS, PREFIX
from gateway.settings.spec import Kind, Spec

_KINDS: dict[str, Kind] = {"bool": "bool", "int": "text", "text": "text", "types": "json",
                           "servers": "json"}


def specs() -> list[Spec]:
    return [Spec(PREFIX + f.name, _KINDS[f.kind], internal=True) for f in FIELDS]
