"""Normalised token counts of one request (gateway contract §10.2), the input to pricing.

Protocol translators produce a ``Usage`` from whatever their upstream reported (or estimated);
cost computation consumes it.  ``input`` is the TOTAL input including cache reads/writes and
image/audio input; ``output`` includes image/audio output and reasoning.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gateway.frozen_init import direct_init


@direct_init
@dataclass(frozen=True)
class Usage:
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0
    image_in: int = 0
    image_out: int = 0
    audio_in: int = 0
    audio_out: int = 0
    #: reasoning tokens (already inside ``output``; informational)
    reasoning: int = 0
    #: True when counts were estimated because the upstream reported none
    estimated: bool = False

    def clamped(self) -> Usage:
        """Negatives to 0; input covers cache and media input; output covers media output.

        Worked out once per object (issue 22): pricing and settlement each ask for every
        request, and the check alone reads ten fields (~1.5 µs).  The answer is kept in the
        instance dict under ``_clamped`` -- True when the object is its own clamped form (not
        the object itself: no reference cycle for the collector), else that form -- which
        equality, hashing, ``repr`` and ``replace`` never see (they use the fields)."""
        known = self.__dict__.get("_clamped")
        if known is True:
            return self
        if known is not None:
            return known  # type: ignore[no-any-return]
        if self._is_clamped():
            self.__dict__["_clamped"] = True
            return self  # the common case
        fields = {name: max(0, getattr(self, name)) for name in (
            "input", "output", "cache_read", "cache_write_5m", "cache_write_1h",
            "image_in", "image_out", "audio_in", "audio_out", "reasoning")}
        fields["input"] = max(
            fields["input"],
            fields["cache_read"] + fields["cache_write_5m"] + fields["cache_write_1h"],
            fields["image_in"] + fields["audio_in"],
        )
        fields["output"] = max(fields["output"], fields["image_out"] + fields["audio_out"])
        done = replace(self, **fields)
        done.__dict__["_clamped"] = True
        self.__dict__["_clamped"] = done
        return done

    def _is_clamped(self) -> bool:
        cache = self.cache_read + self.cache_write_5m + self.cache_write_1h
        return (min(self.input, self.output, self.cache_read, self.cache_write_5m,
                    self.cache_write_1h, self.image_in, self.image_out, self.audio_in,
                    self.audio_out, self.reasoning) >= 0
                and self.input >= cache and self.input >= self.image_in + self.audio_in
                and self.output >= self.image_out + self.audio_out)

    @property
    def total(self) -> int:
        return self.input + self.output
