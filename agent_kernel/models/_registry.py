"""models.registry — turns a model string (or nothing) into a ``Model``, through a small lazy table.

``"anthropic:claude-sonnet-4-6"``, ``"openai:gpt-4.1"``, ``"openai"`` (the provider's default
model), ``"claude-haiku-4-5"`` (a known model without its provider) and ``"offline"`` all resolve
here. Providers are ``module:Class`` strings imported on first use, so ``import agent_kernel``
never imports an SDK. With no model given, ``AGENT_KERNEL_MODEL`` decides, else the first provider
whose key is set, else the offline model.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any

from agent_kernel.errors import UnknownModel, UserError, did_you_mean
from agent_kernel.models._base import Model
from agent_kernel.models._catalog import CONTEXT_WINDOWS, DEFAULT_MODELS, provider_of
from agent_kernel.models._pricing import price

PROVIDERS: dict[str, str] = {
    "anthropic": "agent_kernel.models.anthropic:AnthropicModel",
    "openai": "agent_kernel.models.openai:OpenAIModel",
    "offline": "agent_kernel.models._offline:OfflineModel",
}

# Environment variable holding each provider's key, in the order the default model tries them.
KEY_ENV: dict[str, str] = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}

# Names that are not providers but that people will reach for.
_NOT_A_STRING = {
    "scripted": "A scripted model needs its responses: pass ScriptedModel([...]) from agent_kernel.models, not a string.",
    "function": "A function model needs its function: pass FunctionModel(fn) from agent_kernel.models, not a string.",
}


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """One known model, as ``list_models`` reports it (and ``%agent models`` shows it)."""

    spec: str
    provider: str
    name: str
    context_window: int
    input_price: float | None
    output_price: float | None
    key_env: str | None
    ready: bool

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict."""
        return {name: getattr(self, name) for name in self.__slots__}


def default_model_spec() -> str:
    """The model used when none is given: ``AGENT_KERNEL_MODEL``, else a provider whose key is set, else offline."""
    configured = os.environ.get("AGENT_KERNEL_MODEL", "").strip()
    if configured:
        return configured
    for provider, key_env in KEY_ENV.items():
        if os.environ.get(key_env):
            return f"{provider}:{DEFAULT_MODELS[provider]}"
    return "offline"


def resolve_model(spec: str | Model | None = None, **options: Any) -> Model:
    """Returns the model ``spec`` names.

    Args:
        spec: a ``Model`` (returned as is), a string such as ``"anthropic:claude-sonnet-4-6"``,
            ``"openai:gpt-4.1"``, ``"openai"`` or ``"offline"``, or None for the default model.
        options: keyword arguments for the model's constructor (``base_url``, ``api_key``, ...).

    Raises:
        UnknownModel: the provider or model is not known; the message lists what is.
        MissingAPIKey: the provider's key is not set; the message names the variable.

    Example:
        >>> resolve_model("offline").provider
        'offline'
    """
    if spec is None:
        spec = default_model_spec()
    if not isinstance(spec, str):
        if isinstance(spec, Model):
            return spec
        raise UserError(
            f"model must be a string such as 'anthropic:claude-sonnet-4-6' or a Model, got {type(spec).__name__}."
        )
    provider, name = _split(spec.strip())
    cls = _load(provider)
    if provider == "offline":
        return cls(**options)
    return cls(name or DEFAULT_MODELS[provider], **options)


def list_models() -> list[ModelInfo]:
    """The models the catalog knows, with context window, price and whether their key is set."""
    infos = [ModelInfo("offline", "offline", "offline", 200_000, 0.0, 0.0, None, True)]
    for provider, models in CONTEXT_WINDOWS.items():
        key_env = KEY_ENV[provider]
        for name, window in models.items():
            p = price(f"{provider}:{name}")
            infos.append(
                ModelInfo(
                    f"{provider}:{name}", provider, name, window,
                    p.input if p else None, p.output if p else None, key_env, bool(os.environ.get(key_env)),
                )
            )
    return infos


def _known_specs() -> list[str]:
    return ["offline", *(f"{p}:{n}" for p, models in CONTEXT_WINDOWS.items() for n in models)]


def _split(spec: str) -> tuple[str, str | None]:
    """``(provider, model name or None)`` for a model string, or ``UnknownModel``."""
    if ":" in spec:
        provider, name = spec.split(":", 1)
        provider, name = provider.strip().lower(), name.strip()
        _check_provider(provider, spec)
        if provider == "anthropic" and name and not name.startswith("claude"):
            raise UnknownModel(
                f"{name!r} is not an Anthropic model name (they start with 'claude-')."
                f"{did_you_mean(name, CONTEXT_WINDOWS['anthropic'])} {_known_hint()}"
            )
        return provider, name or None
    lowered = spec.lower()
    if lowered in PROVIDERS:
        return lowered, None
    known_provider = provider_of(spec)
    if known_provider is not None:
        return known_provider, spec
    if lowered.startswith("claude-"):
        return "anthropic", spec
    if lowered in _NOT_A_STRING:
        raise UnknownModel(_NOT_A_STRING[lowered])
    suggestion = did_you_mean(spec, [*PROVIDERS, *(n for m in CONTEXT_WINDOWS.values() for n in m)])
    raise UnknownModel(
        f"{spec!r} is not a known model or provider.{suggestion} Write 'provider:model', e.g. "
        f"'anthropic:{DEFAULT_MODELS['anthropic']}' or 'openai:{DEFAULT_MODELS['openai']}' "
        f"(any model name works after 'openai:' for OpenAI-compatible servers). {_known_hint()}"
    )


def _check_provider(provider: str, spec: str) -> None:
    if provider in PROVIDERS:
        return
    if provider in _NOT_A_STRING:
        raise UnknownModel(_NOT_A_STRING[provider])
    raise UnknownModel(
        f"{spec!r}: {provider!r} is not a known provider.{did_you_mean(provider, PROVIDERS)} "
        f"Known providers: {', '.join(PROVIDERS)}. {_known_hint()}"
    )


def _known_hint() -> str:
    return "agent_kernel.models.list_models() (or %agent models) lists known models."


def _load(provider: str) -> Any:
    module_name, attr = PROVIDERS[provider].split(":")
    return getattr(importlib.import_module(module_name), attr)
