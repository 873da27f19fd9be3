"""The upstream URL policy: what a channel base URL may point at."""

from __future__ import annotations

import pytest

from gateway.channels.net_policy import (
    UnsafeUrl,
    UrlPolicy,
    check_address,
    check_url,
    literal_address,
)
from gateway.settings.store import Settings

STRICT = UrlPolicy()


@pytest.mark.parametrize("url", [
    "https://api.example.com",
    "https://api.example.com/v1",
    "http://upstream.example:8080/v1beta",
    "https://8.8.8.8/v1",
    "https://[2606:4700:4700::1111]/v1",
    "  https://api.example.com/v1  ",
])
def test_public_urls_pass(url: str) -> None:
    assert check_url(url, STRICT) == url.strip()


@pytest.mark.parametrize(("url", "reason"), [
    ("", "empty"),
    ("ftp://api.example.com", "http or https"),
    ("file:///etc/passwd", "http or https"),
    ("api.example.com/v1", "http or https"),
    ("https://user:pass@api.example.com", "credentials"),
    ("https://api.example.com/v1#frag", "fragment"),
    ("https://api.example .com", "whitespace"),
    ("https:///v1", "no host"),
    ("https://api.example.com:99999", "malformed"),
    ("http://169.254.169.254/latest/meta-data", "metadata"),
    ("http://169.254.10.1/", "link-local"),
    ("http://[fe80::1]/", "link-local"),
    ("http://[fd00:ec2::254]/", "metadata"),
    ("http://metadata.google.internal/computeMetadata/v1", "metadata"),
    ("http://METADATA.GOOGLE.INTERNAL./x", "metadata"),
    ("http://127.0.0.1:8080", "private or loopback"),
    ("http://127.1/", "private or loopback"),
    ("http://2130706433/", "private or loopback"),
    ("http://0x7f000001/", "private or loopback"),
    ("http://10.1.2.3/", "private or loopback"),
    ("http://192.168.1.1/", "private or loopback"),
    ("http://172.16.0.1/", "private or loopback"),
    ("http://100.64.0.1/", "private or loopback"),
    ("http://[::1]/", "private or loopback"),
    ("http://[::ffff:127.0.0.1]/", "private or loopback"),
    ("http://[fc00::1]/", "private or loopback"),
    ("http://localhost:11434/", "private or loopback"),
    ("http://api.localhost/", "private or loopback"),
    ("http://0.0.0.0/", "non-routable"),
    ("http://224.0.0.1/", "non-routable"),
    ("http://203.0.113.10/", "private or loopback"),
])
def test_unsafe_urls_are_refused(url: str, reason: str) -> None:
    with pytest.raises(UnsafeUrl, match=reason):
        check_url(url, STRICT)


def test_private_networks_allowed_by_setting_but_metadata_never() -> None:
    policy = UrlPolicy(allow_private=True)
    assert check_url("http://10.0.0.5:8000/v1", policy)
    assert check_url("http://localhost:11434", policy)
    assert check_url("http://[::1]:9000", policy)
    for url in ("http://169.254.169.254/", "http://[fd00:ec2::254]/",
                "http://metadata.google.internal/", "http://169.254.1.1/"):
        with pytest.raises(UnsafeUrl):
            check_url(url, policy)


def test_allowed_hosts_names_wildcards_and_networks() -> None:
    policy = UrlPolicy.from_entries(allowed_hosts=[
        "ollama.local", "*.corp.example", "10.20.0.0/16", "127.0.0.1", "localhost"])
    assert check_url("http://10.20.3.4/v1", policy)
    assert check_url("http://127.0.0.1:8080", policy)
    assert check_url("http://localhost:8080", policy)
    with pytest.raises(UnsafeUrl):
        check_url("http://10.21.0.1/", policy)
    with pytest.raises(UnsafeUrl):
        check_url("http://127.0.0.2/", policy)
    # names are only checked at connect time (no DNS here); the resolved address decides
    check_address("gpu.corp.example", "10.99.0.1", policy)
    check_address("ollama.local", "192.168.0.9", policy)
    with pytest.raises(UnsafeUrl):
        check_address("corp.example", "10.99.0.1", policy)
    with pytest.raises(UnsafeUrl):
        check_address("gpu.corp.example", "169.254.169.254", policy)


def test_protection_off_allows_everything_http() -> None:
    policy = UrlPolicy(protection_enabled=False)
    assert check_url("http://169.254.169.254/", policy)
    assert check_url("http://127.0.0.1/", policy)
    check_address("x", "127.0.0.1", policy)
    with pytest.raises(UnsafeUrl):
        check_url("gopher://127.0.0.1/", policy)
    with pytest.raises(UnsafeUrl):
        check_url("http://u:p@example.com/", policy)


def test_policy_from_settings() -> None:
    settings = Settings({"ssrf_allowed_hosts": "a.example, 10.0.0.0/8  b.example"})
    policy = UrlPolicy.from_settings(settings)
    assert policy.protection_enabled and not policy.allow_private
    assert policy.allowed_names == frozenset({"a.example", "b.example"})
    assert check_url("http://10.3.3.3/", policy)
    off = UrlPolicy.from_settings(Settings({"ssrf_protection_enabled": "false",
                                            "ssrf_allow_private_networks": "true"}))
    assert not off.protection_enabled and off.allow_private


def test_connect_time_check_of_resolved_addresses() -> None:
    check_address("api.example.com", "1.1.1.1", STRICT)
    for ip in ("127.0.0.1", "10.0.0.1", "169.254.169.254", "::1", "::ffff:10.0.0.1"):
        with pytest.raises(UnsafeUrl):
            check_address("api.example.com", ip, STRICT)
    with pytest.raises(UnsafeUrl):
        check_address("api.example.com", "not-an-ip", STRICT)


def test_literal_address_forms() -> None:
    assert str(literal_address("127.1")) == "127.0.0.1"
    assert str(literal_address("[::ffff:10.0.0.1]")) == "10.0.0.1"
    assert literal_address("api.example.com") is None
    assert literal_address("face.cafe") is None


def test_private_refusal_names_the_settings_that_allow_it() -> None:
    for url in ("http://127.0.0.1:8080", "http://localhost:11434/"):
        with pytest.raises(UnsafeUrl) as refused:
            check_url(url, UrlPolicy())
        assert "ssrf_allow_private_networks" in str(refused.value)
        assert "ssrf_allowed_hosts" in str(refused.value)
