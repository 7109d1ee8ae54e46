"""Model strings, the default model, list_models, and the prices behind each llm_complete's cost."""

from __future__ import annotations

import pytest

from agent_kernel.errors import MissingAPIKey, UnknownModel, UserError
from agent_kernel.models import AnthropicModel, OpenAIModel, ScriptedModel, resolve_model
from agent_kernel.models._base import Usage
from agent_kernel.models._offline import OfflineModel
from agent_kernel.models._pricing import PRICES, Price, cost, price
from agent_kernel.models._registry import PROVIDERS, default_model_spec, list_models


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    return monkeypatch


def test_provider_model_strings_build_the_provider_adapters(keys: pytest.MonkeyPatch) -> None:
    claude = resolve_model("anthropic:claude-haiku-4-5")
    gpt = resolve_model("openai:gpt-4.1-mini")

    assert isinstance(claude, AnthropicModel) and (claude.name, claude.context_window) == ("claude-haiku-4-5", 200_000)
    assert isinstance(gpt, OpenAIModel) and (gpt.name, gpt.context_window) == ("gpt-4.1-mini", 1_047_576)


def test_a_provider_alone_or_a_known_model_alone_is_enough(keys: pytest.MonkeyPatch) -> None:
    assert resolve_model("anthropic").name == "claude-sonnet-4-6"
    assert resolve_model("openai").name == "gpt-4.1"
    assert isinstance(resolve_model("gpt-4.1-2025-04-14"), OpenAIModel)
    assert isinstance(resolve_model("claude-opus-4-5"), AnthropicModel)


def test_constructor_options_pass_through_so_a_local_server_needs_no_key() -> None:
    model = resolve_model("openai:llama3.1", base_url="http://localhost:11434/v1")
    assert isinstance(model, OpenAIModel) and str(model.client.base_url) == "http://localhost:11434/v1/"


def test_a_model_object_is_returned_as_is_and_anything_else_is_refused() -> None:
    scripted = ScriptedModel(["hi"])
    assert resolve_model(scripted) is scripted
    with pytest.raises(UserError, match="must be a string"):
        resolve_model(42)  # type: ignore[arg-type]


def test_offline_needs_nothing() -> None:
    model = resolve_model("offline")
    assert isinstance(model, OfflineModel) and (model.provider, model.name) == ("offline", "offline")


def test_the_default_is_the_configured_model_then_anthropic_then_openai_then_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_model_spec() == "offline"
    assert isinstance(resolve_model(None), OfflineModel)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert default_model_spec() == "openai:gpt-4.1"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    assert default_model_spec() == "anthropic:claude-sonnet-4-6"
    monkeypatch.setenv("AGENT_KERNEL_MODEL", "openai:gpt-4o")
    assert resolve_model(None).name == "gpt-4o"


def test_an_explicit_provider_without_its_key_names_the_variable_and_the_offline_model() -> None:
    with pytest.raises(MissingAPIKey) as caught:
        resolve_model("anthropic:claude-sonnet-4-6")
    assert "ANTHROPIC_API_KEY" in str(caught.value) and "model='offline'" in str(caught.value)
    with pytest.raises(MissingAPIKey, match="OPENAI_API_KEY"):
        resolve_model("openai")


def test_an_unknown_provider_gets_a_suggestion_and_the_known_list() -> None:
    with pytest.raises(UnknownModel) as caught:
        resolve_model("antropic:claude-sonnet-4-6")
    message = str(caught.value)
    assert "'antropic' is not a known provider" in message
    assert "Did you mean 'anthropic'?" in message
    assert "Known providers: anthropic, openai, offline" in message


def test_an_unknown_model_string_gets_a_suggestion_and_says_how_to_list_models() -> None:
    with pytest.raises(UnknownModel) as caught:
        resolve_model("gpt-4.1-mimi")
    message = str(caught.value)
    assert "Did you mean 'gpt-4.1-mini'?" in message and "list_models()" in message
    with pytest.raises(UnknownModel, match="start with 'claude-'.*Did you mean 'claude-haiku-4-5'"):
        resolve_model("anthropic:haiku-4-5")


def test_scripted_as_a_string_explains_that_it_needs_its_responses() -> None:
    with pytest.raises(UnknownModel, match=r"ScriptedModel\(\[\.\.\.\]\)"):
        resolve_model("scripted")


def test_every_provider_entry_imports() -> None:
    import importlib

    for provider, target in PROVIDERS.items():
        module, attr = target.split(":")
        assert getattr(importlib.import_module(module), attr).provider == provider


def test_list_models_reports_windows_prices_and_whether_each_is_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    infos = {info.spec: info for info in list_models()}

    assert infos["offline"].ready
    assert infos["anthropic:claude-sonnet-4-6"].key_env == "ANTHROPIC_API_KEY" and not infos["anthropic:claude-sonnet-4-6"].ready
    assert infos["openai:gpt-4.1"].ready and infos["openai:gpt-4.1"].input_price == 2.0
    assert infos["openai:gpt-4.1"].to_dict()["context_window"] == 1_047_576


# ---------------------------------------------------------------- pricing


def test_cost_prices_each_token_class_per_million() -> None:
    usage = Usage(input_tokens=100_000, output_tokens=10_000, cache_read_tokens=20_000, cache_write_tokens=40_000)
    # 0.30 input + 0.15 output + 0.006 cache reads (0.1x) + 0.15 cache writes (1.25x)
    assert cost("claude-sonnet-4-5", usage) == pytest.approx(0.606)
    assert cost("gpt-4.1", Usage(input_tokens=500_000, output_tokens=250_000, cache_read_tokens=1_000_000)) == pytest.approx(1.0 + 2.0 + 0.5)


def test_a_call_past_a_long_context_tier_costs_the_tiers_price() -> None:
    # Claude Sonnet 4.5 bills input over 200K tokens in one request at 6 instead of 3 per million.
    assert cost("claude-sonnet-4-5", Usage(input_tokens=300_000)) == pytest.approx(1.8)
    assert cost("anthropic:claude-sonnet-4-5", Usage(input_tokens=100_000)) == pytest.approx(0.3)


def test_dated_snapshots_and_provider_prefixes_cost_what_their_family_costs() -> None:
    assert price("claude-sonnet-4-5-20250929") == price("claude-sonnet-4-5") is not None
    assert price("openai:gpt-4.1-2025-04-14") == price("gpt-4.1") is not None
    assert price("gpt-4o-2024-05-13") != price("gpt-4o")  # an old snapshot with its own price


def test_an_unknown_model_costs_none_never_zero() -> None:
    for name in ("llama3.1", "gpt-4.1-turbo-x", "claude-sonnet-9"):
        assert cost(name, Usage(input_tokens=1000)) is None


def test_the_offline_model_is_known_to_be_free() -> None:
    assert cost("offline", Usage(input_tokens=10_000, output_tokens=500)) == 0.0


def test_every_price_names_its_source_and_a_custom_table_can_stand_in() -> None:
    for info in list_models():
        p = price(info.spec)
        assert p is not None and p.as_of.startswith(("genai-prices ", "agent_kernel")), info.spec
    assert PRICES["offline"].input == 0.0
    table = {"my-model": Price(1.0, 2.0, 0.0, 0.0, "2026-01-01")}
    assert cost("my-model", Usage(input_tokens=1_000_000, output_tokens=1_000_000), table) == 3.0
