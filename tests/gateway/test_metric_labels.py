"""The metrics' label vocabulary stays bounded (operations contract §2), and histogram buckets
count as Prometheus defines them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import TestCase

from gateway.observability.distribution import BUCKET_LABELS, Distribution
from gateway.observability.labels import FAMILIES, classify, family_of, status_code

ROUTES = {
    "/v1/chat/completions": "chat", "/v1/completions": "completions",
    "/v1/responses": "responses", "/v1/messages": "messages",
    "/v1/models/gemini-pro:generateContent": "modelaction",
    "/v1beta/models/gemini-pro:streamGenerateContent": "modelaction",
    "/v1/audio/speech": "audio", "/v1/audio/transcriptions": "audio",
    "/v1/moderations": "moderations", "/v1/images/generations": "images",
    "/v1/images/edits": "images", "/v1/images/generations/task_1": "images",
    "/v1/videos/generations": "videos", "/v1/video/tasks/abc": "videos",
    "/v1/videos/image2video": "videos", "/v1/artjob/generations/imagine": "artjob",
    "/v1/clipgen2/private-avatar": "clipgen2", "/v1/tasks/vtask_1": "tasks",
    "/v1/uploads/images": "uploads", "/v1/balance": "account", "/v1/user/balance": "account",
    "/v1/models": "models", "/v1/models/gpt-4o": "models",
    "/api/user/api-keys": "console", "/api/channels/3": "console",
    "/auth/password/login": "auth", "/api/public/settings": "public",
    "/api/pricing": "public", "/api/setup": "public", "/api/setup/status": "public",
    "/healthz": "probe", "/readyz": "probe", "/metrics": "probe",
    "/": "other", "/index.html": "other", "/v1/unknown": "other",
}


class LabelTests(TestCase):
    def test_every_route_family(self) -> None:
        for path, family in ROUTES.items():
            assert classify(path) == family, path
            assert family_of(path.encode()) == family, path
        assert set(ROUTES.values()) == set(FAMILIES)

    @given(st.text(max_size=80))
    def test_any_path_gets_a_listed_family(self, path: str) -> None:
        assert classify(path) in FAMILIES
        assert family_of(("/" + path).encode("utf-8", "replace")) in FAMILIES

    @given(st.integers())
    def test_status_code_is_three_digits(self, code: int) -> None:
        label = status_code(code)
        assert len(label) == 3 and label.isdigit()


class DistributionTests(TestCase):
    def test_a_value_on_a_bound_counts_in_that_bucket(self) -> None:
        distribution = Distribution()
        for value in (0.005, 0.0051, 1.0, 300.0, 301.0):
            distribution.observe(value)
        cumulative = dict(distribution.cumulative())
        assert list(cumulative) == list(BUCKET_LABELS)
        assert cumulative["0.005"] == 1
        assert cumulative["0.01"] == 2
        assert cumulative["1.0"] == 3
        assert cumulative["300.0"] == 4
        assert cumulative["+Inf"] == 5
        assert abs(distribution.total - 602.0101) < 1e-9
