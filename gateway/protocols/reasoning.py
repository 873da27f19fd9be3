"""How reasoning settings and reasoning text map between the text formats (contract §9.2).

The formats ask for reasoning in two currencies: OpenAI's chat (``reasoning_effort``) and
Responses (``reasoning.effort``) use an *effort word*; Messages (``thinking.budget_tokens``) and
Google (``generationConfig.thinkingConfig.thinkingBudget``) a *token budget*.  A conversion
keeps whichever the client gave and derives the other with this table (ours; no format
documents an exact equivalence):

=========  ==========  ====================================
effort     budget      budget -> effort
=========  ==========  ====================================
none       0           0 -> no effort sent (thinking off)
minimal    1,024       1 .. 2,048 -> low
low        2,048       2,049 .. 8,192 -> medium
medium     8,192       > 8,192 -> high
high       24,576      -1 (Google "dynamic") -> medium
xhigh      32,768
=========  ==========  ====================================

Showing the reasoning: a Messages client with thinking enabled, a Google client with
``includeThoughts`` and a Responses client with ``reasoning.summary`` set want to see it
(``include_reasoning``); a Responses upstream is then asked for ``summary: "auto"`` and a Google
upstream for ``includeThoughts: true``.  A Messages upstream always shows thinking when enabled.

Chat completions has no standard reasoning field.  We read and write ``reasoning_content``
(the field DeepSeek, vLLM, SGLang and most compatible servers use on the message and on stream
deltas; ``reasoning`` -- OpenRouter's spelling -- is read too).  OpenAI itself returns no
reasoning text on chat completions, so nothing is lost there.

Reasoning in a request's *history* (earlier assistant turns) is not converted: each provider
only accepts back the reasoning it signed itself (Messages ``signature``, Google
``thoughtSignature``, Responses ``encrypted_content``), and a conversion always crosses
providers, so it is dropped -- the model answers fine without it.
"""

from __future__ import annotations

from typing import Any

from gateway.protocols.conversation import Conversation
from gateway.protocols.errors import invalid

EFFORT_BUDGETS: dict[str, int] = {"none": 0, "minimal": 1024, "low": 2048, "medium": 8192,
                                  "high": 24576, "xhigh": 32768}
#: Google's "let the model decide" budget
DYNAMIC_BUDGET = -1
#: the smallest budget a Messages upstream accepts
MESSAGES_MIN_BUDGET = 1024


def effort_for_budget(budget: int) -> str | None:
    """The effort word for a token budget (None: thinking off, send no effort)."""
    if budget == DYNAMIC_BUDGET:
        return "medium"
    if budget <= 0:
        return None
    if budget <= 2048:
        return "low"
    return "medium" if budget <= 8192 else "high"


def effort(conv: Conversation) -> str | None:
    """The effort word to send an effort-speaking upstream."""
    if conv.reasoning_effort is not None:
        return conv.reasoning_effort
    if conv.reasoning_budget is None:
        return None
    return effort_for_budget(conv.reasoning_budget)


def budget(conv: Conversation) -> int | None:
    """The token budget to send a budget-speaking upstream (None: say nothing)."""
    if conv.reasoning_budget is not None:
        return conv.reasoning_budget
    if conv.reasoning_effort is None:
        return None
    return EFFORT_BUDGETS.get(conv.reasoning_effort)


def messages_thinking(conv: Conversation, max_tokens: int | None) -> dict[str, Any] | None:
    """The Messages ``thinking`` object, or None when thinking stays off.

    Messages needs ``budget_tokens`` >= 1,024 and below ``max_tokens``: under the client's own
    output cap (``max_tokens``) the budget is lowered to fit, and thinking is left off when
    even the minimum does not fit (without a cap the caller raises its default by the budget).
    Dynamic becomes the medium budget.
    """
    wanted = budget(conv)
    if wanted == DYNAMIC_BUDGET:
        wanted = EFFORT_BUDGETS["medium"]
    if wanted is None or wanted <= 0:
        return None
    if max_tokens is not None:
        wanted = min(wanted, max_tokens - 1)
    if wanted < MESSAGES_MIN_BUDGET:
        return None
    return {"type": "enabled", "budget_tokens": wanted}


def from_messages_thinking(value: Any) -> dict[str, Any]:
    """Conversation fields for a Messages ``thinking`` object (400 when malformed)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid("thinking must be an object", "thinking")
    kind = value.get("type")
    if kind == "disabled":
        return {"reasoning_budget": 0}
    if kind == "adaptive":
        return {"reasoning_budget": DYNAMIC_BUDGET, "include_reasoning": True}
    if kind != "enabled":
        raise invalid("thinking.type must be enabled, disabled or adaptive", "thinking")
    tokens = value.get("budget_tokens")
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
        raise invalid("thinking.budget_tokens must be a positive integer",
                      "thinking.budget_tokens")
    return {"reasoning_budget": tokens, "include_reasoning": True}


def from_google_thinking(config: dict[str, Any]) -> dict[str, Any]:
    """Conversation fields for a Google ``thinkingConfig`` (400 when malformed)."""
    value = config.get("thinkingConfig")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid("thinkingConfig must be an object", "generationConfig.thinkingConfig")
    result: dict[str, Any] = {}
    tokens = value.get("thinkingBudget")
    if tokens is not None:
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < DYNAMIC_BUDGET:
            raise invalid("thinkingBudget must be an integer >= -1",
                          "generationConfig.thinkingConfig.thinkingBudget")
        result["reasoning_budget"] = tokens
    level = value.get("thinkingLevel")
    if isinstance(level, str) and level.lower() in EFFORT_BUDGETS:
        result["reasoning_effort"] = level.lower()
    include = value.get("includeThoughts")
    if include is not None:
        if not isinstance(include, bool):
            raise invalid("includeThoughts must be a boolean",
                          "generationConfig.thinkingConfig.includeThoughts")
        result["include_reasoning"] = include
    return result


def google_thinking(conv: Conversation) -> dict[str, Any] | None:
    """The Google ``thinkingConfig``, or None when the client asked nothing about reasoning."""
    config: dict[str, Any] = {}
    wanted = budget(conv)
    if wanted is not None:
        config["thinkingBudget"] = wanted
    if conv.include_reasoning is not None:
        config["includeThoughts"] = conv.include_reasoning and wanted != 0
    return config or None


def responses_reasoning(conv: Conversation) -> dict[str, Any] | None:
    """The Responses ``reasoning`` object, or None when the client asked nothing about it."""
    word = effort(conv)
    config: dict[str, Any] = {}
    if word is not None:
        config["effort"] = word
    if conv.include_reasoning and word != "none" and conv.reasoning_budget != 0:
        config["summary"] = "auto"
    return config or None


def from_responses_reasoning(value: dict[str, Any]) -> dict[str, Any]:
    """Conversation fields for a Responses ``reasoning`` object."""
    result: dict[str, Any] = {}
    if value.get("effort") is not None:
        result["reasoning_effort"] = value["effort"]
    summary = value.get("summary", value.get("generate_summary"))
    if summary is not None:
        result["include_reasoning"] = summary not in ("none", False)
    return result
