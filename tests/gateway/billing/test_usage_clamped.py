"""``Usage.clamped`` is worked out once per object, invisibly to equality, hashing and repr."""

from __future__ import annotations

import pickle
from dataclasses import replace

from twisted.trial.unittest import TestCase

from gateway.billing.usage import Usage


class ClampedOnceTests(TestCase):
    def test_an_unclamped_usage_gives_one_clamped_object(self) -> None:
        raw = Usage(input=-3, output=5, cache_read=40, image_out=9)
        first = raw.clamped()
        assert first is raw.clamped()  # kept, not rebuilt
        assert first == Usage(input=40, output=9, cache_read=40, image_out=9)
        assert first.clamped() is first  # its own clamped form
        assert (raw.input, raw.output) == (-3, 5)  # the original is untouched

    def test_the_kept_answer_changes_no_comparison(self) -> None:
        for usage in (Usage(input=7, output=2), Usage(input=-1, output=2, audio_in=4)):
            fresh = replace(usage)
            usage.clamped()
            assert usage == fresh and hash(usage) == hash(fresh)
            assert repr(usage) == repr(fresh)
            assert replace(usage, output=3) == replace(fresh, output=3)
            assert pickle.loads(pickle.dumps(usage)) == fresh
            assert pickle.loads(pickle.dumps(usage)).clamped() == fresh.clamped()

    def test_a_replaced_usage_is_clamped_afresh(self) -> None:
        clamped = Usage(input=10, output=1)
        assert clamped.clamped() is clamped
        changed = replace(clamped, cache_read=30)
        assert changed.clamped() == Usage(input=30, output=1, cache_read=30)
