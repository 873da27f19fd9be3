"""Guessing a model's provider from its name, for models created by a sync.

A synced model arrives as a bare name; the console shows a provider (and its icon) per model,
so a new model gets the provider its name makes obvious (``claude-*`` -> ``anthropic``) and
``custom`` otherwise.  Existing models keep what the admin chose unless a guess is possible.

Pure: no I/O.
"""

from __future__ import annotations

CUSTOM = "custom"

#: (name prefix, provider), checked in order on the lower-cased name without a vendor path
_PREFIXES = (
    ("gpt-", "openai"), ("chatgpt", "openai"), ("o1", "openai"), ("o3", "openai"),
    ("o4", "openai"), ("dall-e", "openai"), ("whisper", "openai"), ("tts-", "openai"),
    ("text-embedding", "openai"), ("claude", "anthropic"), ("gemini", "google"),
    ("gemma", "google"), ("imagen", "google"), ("veo", "google"), ("deepseek", "deepseek"),
    ("mistral", "mistral"), ("mixtral", "mistral"), ("codestral", "mistral"),
    ("llama", "meta"), ("grok", "xai"), ("qwen", "qwen"), ("qwq", "qwen"),
    ("moonshot", "moonshot"), ("kimi", "moonshot"), ("glm", "zhipu"),
)


def guess_provider(model_name: str) -> str:
    """The provider a model name makes obvious, else ``custom``."""
    name = model_name.strip().lower().rsplit("/", 1)[-1]
    for prefix, provider in _PREFIXES:
        if name.startswith(prefix):
            return provider
    return CUSTOM
