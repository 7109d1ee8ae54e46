"""models.sdk_errors — maps each provider SDK's exceptions, and transport failures, to ``ModelError``.

The loop decides what to do with a failed model call from four fields of ``ModelError``:
``retryable``, ``overloaded``, ``retry_after`` and ``kind``. This module is the one place that
sets them, so the adapters never classify an error themselves.

Each provider has a table naming every exception class its SDK exports: either a fixed rule, or
"classified by status", meaning the HTTP status and the error body decide (a 429 for a spend limit
is not worth retrying; an ``overloaded_error`` sent mid-stream with HTTP 200 is an overload).
``tests/test_models_*.py`` enumerate the SDKs' exported exception classes and fail on one missing
from these tables, so an SDK upgrade that adds a class gets a decision rather than a default.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent_kernel.errors import ModelError


@dataclass(frozen=True, slots=True)
class Rule:
    """How one kind of failure is reported: a label, whether to retry, whether it is an overload."""

    kind: str
    retryable: bool
    overloaded: bool = False


_CONNECTION = Rule("connection", True)
_TIMEOUT = Rule("timeout", True)
_SDK = Rule("sdk", False)
_AUTH = Rule("auth", False)
_QUOTA = Rule("quota", False)

# Exported classes whose meaning does not depend on a status code.
ANTHROPIC_FIXED: dict[str, Rule] = {
    "AnthropicError": _SDK,
    "APIConnectionError": _CONNECTION,
    "APITimeoutError": _TIMEOUT,
    "APIResponseValidationError": Rule("bad_response", False),
    "APIWebhookValidationError": _SDK,
    "CredentialsError": _AUTH,
    "IdentityTokenFileError": _AUTH,
    "WorkloadIdentityError": _AUTH,
    "RetryableError": Rule("server", True),
    # 429 and 402 subclasses that no amount of waiting fixes.
    "ContractSpendLimitReachedError": _QUOTA,
    "EnforcedSpendLimitReachedError": _QUOTA,
    "LinkedOrganizationSpendLimitReachedError": _QUOTA,
    "LinkedOrganizationBillingUnavailableError": _QUOTA,
}

# Exported classes classified by their HTTP status and error body.
ANTHROPIC_BY_STATUS: frozenset[str] = frozenset(
    {
        "APIError",
        "APIStatusError",
        "AuthenticationError",
        "BadRequestError",
        "CMEKContextUnavailableError",
        "CMEKKeyDisabledError",
        "CMEKKeyNetworkBlockedError",
        "CMEKKeyUnreachableError",
        "ClaudeCodeKeyCreatorNotMemberError",
        "ClaudeCodeVersionTooOldError",
        "ClientClosedRequestError",
        "ConflictError",
        "ContentTooLargeError",
        "DeadlineExceededError",
        "GatewayTimeoutError",
        "HTTPNotImplementedError",
        "InternalServerError",
        "NotFoundError",
        "OrganizationOnHoldError",
        "OrganizationTypeNotSupportedError",
        "OverloadedError",
        "ParentOrganizationRequiredError",
        "PaymentRequiredError",
        "PermissionDeniedError",
        "PreconditionFailedError",
        "RampLimitExceededError",
        "RateLimitError",
        "RequestBodyEncodingInvalidError",
        "RequestBodyEncodingUnsupportedError",
        "RequestBodyTooLargeAfterDecodingError",
        "RequestHeaderFieldsTooLargeError",
        "RequestTimeoutError",
        "RequestTooLargeError",
        "SandboxEgressRestrictedError",
        "ServiceUnavailableError",
        "UnprocessableEntityError",
        "WorkspaceHumanReviewDisabledError",
    }
)

OPENAI_FIXED: dict[str, Rule] = {
    "OpenAIError": _SDK,
    "APIConnectionError": _CONNECTION,
    "APITimeoutError": _TIMEOUT,
    "APIResponseValidationError": Rule("bad_response", False),
    "ContentFilterFinishReasonError": Rule("content_filter", False),
    "LengthFinishReasonError": Rule("max_tokens", False),
    "InvalidWebhookSignatureError": _SDK,
    "WebSocketConnectionClosedError": _CONNECTION,
    "WebSocketQueueFullError": _SDK,
}

OPENAI_BY_STATUS: frozenset[str] = frozenset(
    {
        "APIError",
        "APIStatusError",
        "AuthenticationError",
        "BadRequestError",
        "ConflictError",
        "InternalServerError",
        "NotFoundError",
        "OAuthError",
        "PermissionDeniedError",
        "RateLimitError",
        "UnprocessableEntityError",
    }
)

_BY_STATUS: dict[int, Rule] = {
    400: Rule("bad_request", False),
    401: _AUTH,
    402: _QUOTA,
    403: Rule("permission", False),
    404: Rule("not_found", False),
    408: _TIMEOUT,
    409: Rule("conflict", True),
    413: Rule("too_large", False),
    429: Rule("rate_limit", True),
    499: Rule("client_closed", True),
    500: Rule("server", True),
    501: Rule("not_implemented", False),
    502: Rule("bad_gateway", True),
    503: Rule("unavailable", True),
    504: Rule("gateway_timeout", True),
    529: Rule("overloaded", True, overloaded=True),
}

# Error ``type``/``code`` values a provider sends in a body (or mid-stream, under HTTP 200),
# read as the status they stand for.
_TYPE_STATUS: dict[str, int] = {
    "invalid_request_error": 400,
    "invalid_prompt": 400,  # the Responses API's code for a prompt it refuses (response.failed)
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "api_error": 500,
    "server_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}

_CONTEXT_MARKERS = (
    "prompt is too long",
    "context_length_exceeded",
    "maximum context length",
    "context length",
    "context window",
    "context size",
    "input is too long",
    "too many tokens",
)
_QUOTA_MARKERS = ("insufficient_quota", "exceeded your current quota", "spend_limit", "spend limit", "billing")

_HINTS: dict[str, str] = {
    "auth": "Check {key_env} (or the api_key you passed); it was refused.",
    "permission": "The key is valid but not allowed to do this; check the key's workspace and model access.",
    "not_found": "Check the model name; agent_kernel.models.list_models() lists known ones.",
    "context_length": "The conversation is longer than the model's context window; compact it or pick a model with a larger window.",
    "too_large": "The request body is too large; send fewer or smaller messages.",
    "quota": "The account's quota or spend limit is reached; retrying will not help until it is raised.",
    "bad_request": "The provider rejected the request as sent; the message above says which part.",
}


def transport_errors() -> tuple[type[BaseException], ...]:
    """The transport exception bases the SDKs can let through while a stream is read.

    The SDKs send through ``httpx2`` (current) or ``httpx`` (older releases); both are named so
    either works.
    """
    found: list[type[BaseException]] = []
    for module_name in ("httpx2", "httpx"):
        try:
            module = __import__(module_name)
        except ImportError:
            continue
        found.append(module.TransportError)
    return tuple(found)


_TRANSPORT = transport_errors()


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait, from ``retry-after-ms`` or ``retry-after``.

    ``retry-after`` may be seconds (integer or decimal) or an HTTP date. Returns None when absent
    or unreadable; never negative.
    """
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _error_fields(body: Any) -> tuple[str | None, str | None, str | None]:
    """``(type, code, message)`` from an error body in either provider's shape."""
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return None, None, body or None
    if not isinstance(body, Mapping):
        return None, None, None
    inner = body.get("error")
    if isinstance(inner, Mapping):
        body = inner
    kind, code, message = body.get("type"), body.get("code"), body.get("message")
    details = body.get("details")
    if code is None and isinstance(details, Mapping):
        code = details.get("error_code")
    return (
        kind if isinstance(kind, str) else None,
        code if isinstance(code, str) else None,
        message if isinstance(message, str) else None,
    )


def _rule_for_status(status: int | None, err_type: str | None, code: str | None, message: str) -> Rule:
    effective = status if status is not None and status >= 400 else None
    if effective is None:
        effective = _TYPE_STATUS.get(err_type or "") or _TYPE_STATUS.get(code or "")
    text = f"{err_type or ''} {code or ''} {message}".lower()
    if err_type == "overloaded_error" or effective == 529:
        return _BY_STATUS[529]
    if effective == 503 and "overloaded" in text:
        return Rule("unavailable", True, overloaded=True)
    if effective in (400, 413, 422, None) and any(m in text for m in _CONTEXT_MARKERS):
        return Rule("context_length", False)
    if effective in (402, 429) and any(m in text for m in _QUOTA_MARKERS):
        return _QUOTA
    if effective is None:
        # An error event inside a stream that names no known type: usually transient.
        return Rule("api_error", True)
    rule = _BY_STATUS.get(effective)
    if rule is not None:
        return rule
    return Rule("server", True) if effective >= 500 else Rule("bad_request", False)


def _classify(
    exc: BaseException,
    *,
    provider: str,
    key_env: str,
    fixed: Mapping[str, Rule],
    by_status: frozenset[str],
    started: bool,
) -> ModelError:
    if isinstance(exc, ModelError):
        return exc
    status: int | None = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        status = None
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) if response is not None else None
    err_type, code, api_message = _error_fields(getattr(exc, "body", None))
    detail = api_message or str(exc) or type(exc).__name__

    rule: Rule | None = None
    if _TRANSPORT and isinstance(exc, _TRANSPORT):
        rule = _TIMEOUT if "Timeout" in type(exc).__name__ else _CONNECTION
    else:
        for cls in type(exc).__mro__:
            if cls.__name__ in fixed:
                rule = fixed[cls.__name__]
                break
            if cls.__name__ in by_status:
                rule = _rule_for_status(status, err_type, code, detail)
                break
    if rule is None:
        rule = Rule("unexpected", False)
    if started and rule.kind in ("connection", "timeout"):
        # Bytes already arrived, so this is a stream cut mid-way, not a failed connect.
        rule = Rule("stream_cut", True)

    where = f"HTTP {status}" if status is not None and status >= 400 else ("mid-stream" if started else None)
    label = f"{provider} {rule.kind.replace('_', ' ')}" + (f" ({where})" if where else "")
    message = f"{label}: {detail.strip()}"
    hint = _HINTS.get(rule.kind)
    if hint:
        message += ("" if message.endswith((".", "!", "?")) else ".") + " " + hint.format(key_env=key_env)
    error = ModelError(
        message,
        retryable=rule.retryable,
        status_code=status if status is not None and status >= 400 else None,
        retry_after=parse_retry_after(headers) if rule.retryable else None,
        overloaded=rule.overloaded,
        kind=rule.kind,
    )
    error.__cause__ = exc
    return error


def map_anthropic_error(exc: BaseException, *, started: bool = False) -> ModelError:
    """The ``ModelError`` for an exception raised by the ``anthropic`` SDK or its transport.

    Args:
        exc: what the SDK raised.
        started: whether stream events had already arrived (a dropped connection is then a
            ``stream_cut``).
    """
    return _classify(
        exc, provider="Anthropic", key_env="ANTHROPIC_API_KEY", fixed=ANTHROPIC_FIXED,
        by_status=ANTHROPIC_BY_STATUS, started=started,
    )


def map_openai_error(exc: BaseException, *, started: bool = False) -> ModelError:
    """The ``ModelError`` for an exception raised by the ``openai`` SDK or its transport."""
    return _classify(
        exc, provider="OpenAI", key_env="OPENAI_API_KEY", fixed=OPENAI_FIXED,
        by_status=OPENAI_BY_STATUS, started=started,
    )


def stream_cut(provider: str, detail: str) -> ModelError:
    """The error for a stream that ended before the provider said the response was complete."""
    return ModelError(f"{provider} stream cut mid-way: {detail}", retryable=True, kind="stream_cut")
