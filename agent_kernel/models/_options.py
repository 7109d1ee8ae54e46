"""models.options — the request options the adapters understand, checked in one place.

``ModelRequest.options`` holds provider-neutral settings; each adapter uses the ones that apply to
it and ignores the rest (``thinking_budget`` means nothing to Chat Completions, ``reasoning_effort``
nothing to Anthropic), so a fallback from one provider to the other keeps working. Settings only
one SDK knows go under the provider's own key and are passed to its ``create`` call unchanged::

    {"max_tokens": 2048, "temperature": 0.2, "anthropic": {"top_k": 40}, "openai": {"seed": 7}}

A key that is none of these is a typo, and says so.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, Union

from agent_kernel.errors import UserError, did_you_mean

#: The neutral tool choice each adapter maps to its API's shape: a mode, or one tool by name.
ToolChoice = Union[str, Mapping[str, str]]
_TOOL_CHOICE_MODES = ("auto", "none", "required")

KNOWN_OPTIONS: dict[str, str] = {
    "max_tokens": "most tokens to generate",
    "temperature": "sampling temperature",
    "top_p": "nucleus sampling",
    "stop": "list of stop sequences",
    "thinking_budget": "Anthropic extended thinking: tokens the model may think for (>= 1024), or 'adaptive'",
    "reasoning_effort": "OpenAI reasoning models: 'low', 'medium' or 'high'",
    "tool_choice": "'auto', 'none' (tools stay declared but cannot be called), 'required', or {'name': TOOL}",
    "anthropic": "dict passed unchanged to anthropic messages.create",
    "openai": "dict passed unchanged to openai responses.create (or chat.completions.create with api='chat')",
}


def check_options(options: Mapping[str, Any]) -> None:
    """Raises ``UserError`` naming any option key no adapter understands."""
    for key in options:
        if key not in KNOWN_OPTIONS:
            known = ", ".join(sorted(KNOWN_OPTIONS))
            raise UserError(
                f"Unknown model option {key!r}.{did_you_mean(key, KNOWN_OPTIONS)} Known options: {known}. "
                "Put a provider-specific setting under the 'anthropic' or 'openai' key."
            )
    if "tool_choice" in options:
        tool_choice(options)


def tool_choice(options: Mapping[str, Any]) -> ToolChoice | None:
    """The request's neutral ``tool_choice`` (None when not set), checked.

    Raises:
        UserError: it is neither a known mode nor ``{"name": TOOL}``.
    """
    choice = options.get("tool_choice")
    if choice is None:
        return None
    if isinstance(choice, str) and choice in _TOOL_CHOICE_MODES:
        return choice
    if isinstance(choice, Mapping) and set(choice) == {"name"} and isinstance(choice["name"], str) and choice["name"]:
        return {"name": choice["name"]}
    raise UserError(
        f"Model option 'tool_choice' must be 'auto', 'none', 'required' or {{'name': TOOL}}, got {choice!r}. "
        "Pass the neutral form: each adapter turns it into its API's shape."
    )


def provider_extras(options: Mapping[str, Any], provider: str) -> dict[str, Any]:
    """The provider's own pass-through settings (an empty dict when there are none)."""
    extras = options.get(provider) or {}
    if not isinstance(extras, Mapping):
        raise UserError(f"Model option {provider!r} must be a dict of {provider} SDK arguments, got {type(extras).__name__}.")
    return dict(extras)


def fit_to_signature(create: Callable[..., Any], params: dict[str, Any]) -> dict[str, Any]:
    """``params`` as keyword arguments of the SDK's ``create``: names it does not take go in ``extra_body``.

    SDK releases add and drop parameters (anthropic 2.x no longer takes ``temperature``, which
    some models still accept); sending them in the body keeps every setting working on every
    release, and the API, not the SDK, says whether it applies.
    """
    accepted = _parameters(create)
    if accepted is None:
        return params
    fitted = {k: v for k, v in params.items() if k in accepted}
    extra = {k: v for k, v in params.items() if k not in accepted}
    if extra:
        fitted["extra_body"] = {**extra, **(params.get("extra_body") or {})}
    return fitted


def _parameters(create: Callable[..., Any]) -> frozenset[str] | None:
    try:
        parameters = inspect.signature(create).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    return frozenset(p.name for p in parameters)
