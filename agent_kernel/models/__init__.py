"""models — the Model protocol, offline models, and the provider adapters (loaded lazily)."""

from __future__ import annotations

from typing import Any

from agent_kernel.models._base import MessageEnd, Model, ModelRequest, StreamEvent, TextDelta, ThinkingDelta, ToolCallDelta, ToolCallEnd, ToolCallStart, ToolSpec, Usage
from agent_kernel.models.scripted import FunctionModel, ScriptedModel

__all__ = [
    "AnthropicModel",
    "FunctionModel",
    "MessageEnd",
    "Model",
    "ModelRequest",
    "OpenAIModel",
    "ScriptedModel",
    "StreamEvent",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolSpec",
    "Usage",
    "cost",
    "default_model_spec",
    "list_models",
    "price",
    "resolve_model",
]

_LAZY = {
    "AnthropicModel": ("agent_kernel.models.anthropic", "AnthropicModel"),
    "OpenAIModel": ("agent_kernel.models.openai", "OpenAIModel"),
    "resolve_model": ("agent_kernel.models._registry", "resolve_model"),
    "default_model_spec": ("agent_kernel.models._registry", "default_model_spec"),
    "list_models": ("agent_kernel.models._registry", "list_models"),
    "cost": ("agent_kernel.models._pricing", "cost"),
    "price": ("agent_kernel.models._pricing", "price"),
}


def __getattr__(name: str) -> Any:
    # The SDK-backed adapters import their SDKs on first use, so `import agent_kernel` stays fast.
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'agent_kernel.models' has no attribute {name!r}")
