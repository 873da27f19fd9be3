"""Gateway error shapes: each family parses as its official SDK's typed error; catalogue texts."""

from __future__ import annotations

import anthropic
import httpx2
import openai
import orjson
import pytest
from google.genai import errors as genai_errors

from gateway import errors
from gateway.errors import MESSAGES, MODELACTION, OPENAI, GatewayError, render

REQUEST = httpx2.Request("POST", "http://127.0.0.1:1/v1/chat/completions")


def as_response(family: str, error: GatewayError) -> httpx2.Response:
    status, headers, body = render(family, error)
    return httpx2.Response(status, headers=headers, content=body, request=REQUEST)


def openai_error(error: GatewayError) -> openai.APIStatusError:
    client = openai.OpenAI(api_key="sk-test", base_url="http://127.0.0.1:1/v1")
    return client._make_status_error_from_response(as_response(OPENAI, error))


def anthropic_error(error: GatewayError) -> anthropic.APIStatusError:
    client = anthropic.Anthropic(api_key="sk-test", base_url="http://127.0.0.1:1")
    return client._make_status_error_from_response(as_response(MESSAGES, error))


def genai_error(error: GatewayError) -> genai_errors.APIError:
    with pytest.raises(genai_errors.APIError) as raised:
        genai_errors.APIError.raise_for_response(as_response(MODELACTION, error))
    return raised.value


CATALOGUE = [
    (errors.gateway_disabled(), 503, "Token API access is disabled by the administrator"),
    (errors.auth_required(), 401, "Authorization is required"),
    (errors.invalid_api_key(), 401, "Invalid API key"),
    (errors.invalid_session(), 401, "Invalid session"),
    (errors.user_not_found(), 401, "User not found"),
    (errors.ip_not_allowed(), 403, "API key is not allowed from this IP"),
    (errors.model_not_allowed(), 403, "API key is not allowed to use this model"),
    (errors.rate_limited(7), 429, "Rate limit exceeded"),
    (errors.user_channel_rate_limited(7, 3), 429, "User channel rate limit exceeded"),
    (errors.invalid_body(), 400, "Invalid request body"),
    (errors.unreadable_body(), 400, "Failed to read request body"),
    (errors.body_too_large(1024), 413, "Request body exceeds maximum 1024 bytes"),
    (errors.file_too_large(30, 20), 413, "file size 30 exceeds maximum 20 bytes"),
    (errors.model_not_specified(), 400, "Model not specified"),
    (errors.insufficient_balance(), 402, "Insufficient balance"),
    (errors.key_quota_exceeded(), 402, "API key quota exceeded"),
    (errors.request_blocked(), 403, "Request blocked by content policy"),
    (errors.response_blocked(), 403, "Response blocked by content policy"),
    (errors.not_found(), 404, "Not found"),
    (errors.task_not_found(), 404, "Task not found"),
    (errors.video_task_not_found(), 404, "Video task not found"),
    (errors.meta_model_failed(), 500, "Failed to resolve meta model"),
    (errors.meta_model_unresolved(), 503, "Meta model did not resolve to a model"),
    (errors.no_channel(), 503, "No available channel for this model"),
    (errors.no_model_config(), 503, "No enabled model configuration for this model"),
    (errors.upstream_failed(), 502, "Upstream request failed"),
    (errors.upstream_read_failed(), 502, "Failed to read upstream response"),
    (errors.ssrf_blocked(), 502, "Upstream URL blocked by SSRF protection"),
    (errors.unsupported_stream(), 400, "Streaming is not supported for this endpoint"),
    (errors.invalid_request("messages are required"), 400, "messages are required"),
    (errors.unsupported_upstream("Image generation is only supported for OpenAI-compatible "
                                 "upstream channels"), 400,
     "Image generation is only supported for OpenAI-compatible upstream channels"),
]


@pytest.mark.parametrize(("error", "status", "message"), CATALOGUE)
def test_catalogue_status_and_message_same_in_every_family(error, status, message):
    assert error.status == status and error.message == message
    for family in (OPENAI, MESSAGES, MODELACTION):
        got_status, headers, body = render(family, error)
        assert got_status == status
        assert headers["Content-Type"] == "application/json"
        text = orjson.loads(body)
        inner = text["error"]
        assert inner["message"] == message


def test_openai_shape():
    status, _headers, body = render(OPENAI, errors.invalid_api_key())
    assert status == 401
    assert orjson.loads(body) == {"error": {
        "message": "Invalid API key", "type": "authentication_error",
        "code": "invalid_api_key", "param": None}}


def test_messages_shape():
    _status, _headers, body = render(MESSAGES, errors.model_not_allowed())
    assert orjson.loads(body) == {"type": "error", "error": {
        "type": "permission_error", "message": "API key is not allowed to use this model"}}


def test_modelaction_shape():
    _status, _headers, body = render(MODELACTION, errors.no_channel())
    assert orjson.loads(body) == {"error": {
        "code": 503, "message": "No available channel for this model", "status": "UNAVAILABLE"}}


def test_unknown_family_is_a_programming_error():
    with pytest.raises(ValueError):
        render("flat", errors.not_found())


@pytest.mark.parametrize(("error", "cls"), [
    (errors.invalid_body(), openai.BadRequestError),
    (errors.auth_required(), openai.AuthenticationError),
    (errors.ip_not_allowed(), openai.PermissionDeniedError),
    (errors.not_found(), openai.NotFoundError),
    (errors.rate_limited(3), openai.RateLimitError),
    (errors.upstream_failed(), openai.InternalServerError),
    (errors.no_channel(), openai.InternalServerError),
])
def test_openai_sdk_raises_typed_errors(error, cls):
    raised = openai_error(error)
    assert type(raised) is cls
    assert raised.message == f"Error code: {error.status} - {error.message}"
    assert raised.body["message"] == error.message
    assert raised.code == error.code
    assert raised.type == error.type


def test_openai_sdk_402_is_a_status_error_with_our_message():
    raised = openai_error(errors.insufficient_balance())
    assert type(raised) is openai.APIStatusError
    assert raised.status_code == 402
    assert raised.body["message"] == "Insufficient balance"
    assert raised.code == "insufficient_balance"


@pytest.mark.parametrize(("error", "cls", "kind"), [
    (errors.invalid_body(), anthropic.BadRequestError, "invalid_request_error"),
    (errors.invalid_api_key(), anthropic.AuthenticationError, "authentication_error"),
    (errors.model_not_allowed(), anthropic.PermissionDeniedError, "permission_error"),
    (errors.not_found(), anthropic.NotFoundError, "not_found_error"),
    (errors.body_too_large(10), anthropic.APIStatusError, "request_too_large"),
    (errors.rate_limited(2), anthropic.RateLimitError, "rate_limit_error"),
    (errors.meta_model_failed(), anthropic.InternalServerError, "api_error"),
    (errors.upstream_failed(), anthropic.InternalServerError, "api_error"),
    (errors.no_channel(), anthropic.InternalServerError, "overloaded_error"),
    (errors.insufficient_balance(), anthropic.APIStatusError, "invalid_request_error"),
])
def test_anthropic_sdk_raises_typed_errors(error, cls, kind):
    raised = anthropic_error(error)
    assert isinstance(raised, cls)
    assert raised.status_code == error.status
    assert raised.body["error"]["type"] == kind
    assert raised.body["error"]["message"] == error.message


def test_anthropic_529_is_overloaded():
    raised = anthropic_error(GatewayError(529, "busy", type="server_error"))
    assert isinstance(raised, anthropic.OverloadedError)


@pytest.mark.parametrize(("error", "cls", "status_name"), [
    (errors.invalid_body(), genai_errors.ClientError, "INVALID_ARGUMENT"),
    (errors.auth_required(), genai_errors.ClientError, "UNAUTHENTICATED"),
    (errors.ip_not_allowed(), genai_errors.ClientError, "PERMISSION_DENIED"),
    (errors.not_found(), genai_errors.ClientError, "NOT_FOUND"),
    (errors.rate_limited(1), genai_errors.ClientError, "RESOURCE_EXHAUSTED"),
    (errors.key_quota_exceeded(), genai_errors.ClientError, "RESOURCE_EXHAUSTED"),
    (errors.body_too_large(5), genai_errors.ClientError, "INVALID_ARGUMENT"),
    (errors.meta_model_failed(), genai_errors.ServerError, "INTERNAL"),
    (errors.upstream_failed(), genai_errors.ServerError, "UNAVAILABLE"),
    (errors.no_channel(), genai_errors.ServerError, "UNAVAILABLE"),
])
def test_genai_sdk_raises_typed_errors(error, cls, status_name):
    raised = genai_error(error)
    assert type(raised) is cls
    assert raised.code == error.status
    assert raised.status == status_name
    assert raised.message == error.message


def test_rate_limited_carries_retry_after_in_body_and_header():
    for family in (OPENAI, MESSAGES, MODELACTION):
        status, headers, body = render(family, errors.rate_limited(0))
        assert status == 429
        assert headers["Retry-After"] == "1"  # whole seconds, at least 1
        assert orjson.loads(body)["error"]["retry_after"] == 1
    assert render(OPENAI, errors.rate_limited(42))[1]["Retry-After"] == "42"


def test_user_channel_limit_body_has_type_channel_and_retry():
    error = errors.user_channel_rate_limited(
        12, 9, {"X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "0"})
    status, headers, body = render(OPENAI, error)
    assert status == 429
    assert headers["Retry-After"] == "12"
    assert headers["X-RateLimit-Limit"] == "5"
    assert orjson.loads(body) == {"error": {
        "message": "User channel rate limit exceeded", "type": "user_channel_rate_limit",
        "code": "user_channel_rate_limit", "param": None, "retry_after": 12, "channel_id": 9}}
    inner = orjson.loads(render(MESSAGES, error)[2])["error"]
    assert inner["type"] == "rate_limit_error" and inner["channel_id"] == 9


@pytest.mark.parametrize(("upstream", "ours"), [
    (400, 400), (404, 404), (409, 409), (413, 413), (422, 422), (429, 429),
    (401, 502), (403, 502), (500, 502), (502, 502), (503, 502), (504, 502),
    (402, 502), (405, 502), (418, 502),
])
def test_upstream_status_mapping(upstream, ours):
    error = errors.from_upstream(upstream)
    assert error.status == ours
    assert error.message == "Upstream request failed"
    assert error.type == "upstream_error"


def test_upstream_error_never_carries_upstream_text():
    # the only upstream input is the status and a Retry-After number: a body cannot leak
    error = errors.from_upstream(401)
    body = render(OPENAI, error)[2]
    assert b"Upstream request failed" in body
    assert set(orjson.loads(body)["error"]) == {"message", "type", "code", "param"}


def test_upstream_429_retry_after_passed_on_only_when_numeric():
    error = errors.from_upstream(429, " 17 ")
    assert error.headers == {"Retry-After": "17"} and error.extra == {"retry_after": 17}
    assert errors.from_upstream(429, "Wed, 21 Oct 2026 07:28:00 GMT").headers == {}
    assert errors.from_upstream(429, "sk-upstream-secret").headers == {}
    assert errors.from_upstream(503, "5").headers == {}  # 503 becomes our 502: no retry hint


@pytest.mark.parametrize(("path", "family"), [
    ("/v1/chat/completions", OPENAI),
    ("/v1/responses", OPENAI),
    ("/v1/models", OPENAI),
    ("/v1/tasks/abc", OPENAI),
    ("/v1/messages", MESSAGES),
    ("/v1/models/gemini-pro:generateContent", MODELACTION),
    ("/v1beta/models/gemini-pro:streamGenerateContent", MODELACTION),
])
def test_family_for_path(path, family):
    assert errors.family_for_path(path) == family


def test_errors_are_exceptions_and_do_not_share_state():
    first = errors.rate_limited(5)
    first.headers["X"] = "y"
    assert "X" not in errors.rate_limited(5).headers
    with pytest.raises(GatewayError) as raised:
        raise errors.no_channel()
    assert raised.value.status == 503
