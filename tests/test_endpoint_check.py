"""%agent setup's Test button (models/endpoint_check.py), through the real SDK adapters against the
strict fake endpoints: a working endpoint, one that rejects tool schemas, a wrong key, a model
that answers in text instead of calling the tool."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent_kernel.models._endpoint_check import check_endpoint

from .conformance import HARNESSES, Harness
from .fakes.server import Fail
from .fakes.turns import turn


@pytest.fixture(params=["anthropic", "openai-chat"])
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    h = HARNESSES[request.param]()
    try:
        yield h
    finally:
        h.close()


async def test_a_working_endpoint_streams_with_a_time_to_first_token_and_calls_the_tool(harness: Harness) -> None:
    harness.script(turn("ready"), turn(calls=[("t1", "get_time", {"zone": "UTC"})]))
    streaming, tools = await check_endpoint(harness.model())
    assert streaming.ok and streaming.check == "streaming" and streaming.first_token_s is not None
    assert "first token after" in streaming.message and "'ready'" in streaming.message
    assert tools.ok and "get_time" in tools.message
    offered = harness.requests()[-1]["tools"]
    assert len(offered) == 1 and "get_time" in str(offered[0])  # the request really carried the schema


async def test_an_endpoint_that_rejects_tools_or_the_key_gets_a_verdict_in_words(harness: Harness) -> None:
    harness.script(turn("ready"), Fail(400, "tools are not supported by this server"))
    streaming, tools = await check_endpoint(harness.model())
    assert streaming.ok and not tools.ok
    assert "tool schema failed" in tools.message and "tools are not supported" in tools.message

    harness.script(Fail(401, "invalid x-api-key"), Fail(401, "invalid x-api-key"))
    streaming, tools = await check_endpoint(harness.model())
    assert not streaming.ok and not tools.ok
    assert "streamed request failed" in streaming.message and "key" in streaming.message.lower()


async def test_a_model_that_answers_in_text_instead_of_calling_the_tool_is_told_apart(harness: Harness) -> None:
    harness.script(turn("ready"), turn("It is noon."))
    _, tools = await check_endpoint(harness.model())
    assert not tools.ok and "answered in text instead of calling the tool" in tools.message


async def test_the_setup_form_tests_the_endpoint_and_keeps_the_key_out_of_the_notebook(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_kernel.jupyter._setup import SetupForm

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    h = HARNESSES["anthropic"]()
    try:
        used: list[str] = []
        form = SetupForm(on_use=used.append)
        assert form.provider.value == "anthropic" and "claude-sonnet-4-6" in form.model.options
        form.base_url.value = h.server.url  # type: ignore[attr-defined]
        form.key.value = "sk-ant-test"
        h.script(turn("ready"), turn(calls=[("t1", "get_time", {"zone": "UTC"})]))
        verdicts = await form.test()
        assert [v.ok for v in verdicts] == [True, True]
        assert 'data-ok="true"' in form.verdicts.value and "first token after" in form.verdicts.value
        # The key is in this process's environment, and nowhere in the widgets' state.
        import os

        assert os.environ["ANTHROPIC_API_KEY"] == "sk-ant-test"
        assert "sk-ant-test" not in str(form.key.get_state()) and "sk-ant-test" not in form.verdicts.value
        assert "set in ANTHROPIC_API_KEY" in form.key.placeholder
        form.use()
        assert used == ["anthropic:claude-sonnet-4-6"] and os.environ["ANTHROPIC_BASE_URL"] == h.server.url  # type: ignore[attr-defined]

        form.provider.value = "openai"
        form.base_url.value = ""
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        missing = await form.test()  # no key: said in words, no request made
        assert not missing[0].ok and "OPENAI_API_KEY" in missing[0].message
    finally:
        h.close()
