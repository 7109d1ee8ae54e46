"""Tools that show pictures: a plot from the python tool or an image output of a notebook reaches
the model as an image, through each real SDK adapter over its strict fake endpoint."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import nbformat
import pytest

from agent_kernel import Agent, EventType
from agent_kernel.journal import read_events
from agent_kernel.messages import ImageBlock, ToolResultBlock, block_from_dict, block_to_dict
from agent_kernel.models.scripted import ScriptedModel, tool_call
from agent_kernel.tools.builtin._images import MAX_EDGE, image_block, png_size
from tests.fakes.server import FakeProvider
from tests.fakes.turns import turn
from tests.helpers import of_type

PLOT = (
    "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
    "fig, ax = plt.subplots()\nax.plot([1, 2, 3], [2, 4, 8])\n"
    "ax.set_title('Growth')\nax.set_xlabel('day')\nax.set_ylabel('users')\nprint('plotted')"
)


def _model(kind: str, url: str) -> Any:
    from agent_kernel.models.anthropic import AnthropicModel
    from agent_kernel.models.openai import OpenAIModel

    if kind == "anthropic":
        return AnthropicModel("claude-sonnet-4-6", base_url=url, api_key="sk-ant-test")
    if kind == "openai-chat":
        return OpenAIModel("gpt-4.1", base_url=url + "/v1", api_key="sk-test", api="chat", images=True)
    return OpenAIModel("gpt-4.1", base_url=url + "/v1", api_key="sk-test", api="responses", images=True)


def _images_sent(kind: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """(media type, base64 data) of every image in a request body, in the adapter's wire form."""
    found = []
    if kind == "anthropic":
        for message in body["messages"]:
            for block in message["content"] if isinstance(message["content"], list) else ():
                for part in block.get("content") if isinstance(block.get("content"), list) else ():
                    if part["type"] == "image":
                        found.append((part["source"]["media_type"], part["source"]["data"]))
    elif kind == "openai-chat":
        for message in body["messages"]:
            for part in message["content"] if isinstance(message["content"], list) else ():
                if part["type"] == "image_url":
                    media, data = part["image_url"]["url"][5:].split(";base64,")
                    found.append((media, data))
    else:
        for item in body["input"]:
            for part in item.get("content") if isinstance(item.get("content"), list) else ():
                if part["type"] == "input_image":
                    media, data = part["image_url"][5:].split(";base64,")
                    found.append((media, data))
    return found


@pytest.mark.parametrize("kind", ["anthropic", "openai-chat", "openai-responses"])
async def test_a_plot_from_the_python_tool_reaches_the_model_as_an_image(kind: str, tmp_path: Path) -> None:
    with FakeProvider() as server:
        server.script(turn(calls=[("call_plot", "python", {"code": PLOT})]), turn("A line rising from 2 to 8."))
        agent = Agent(_model(kind, server.url), tools=["python"], permissions="bypass", working_dir=tmp_path, retry_base_delay=0.001)
        agent.tool_extras["namespace"] = {}
        result = await agent.run("Plot the growth.")
        assert result.text == "A line rising from 2 to 8."
        assert server.rejected == []
        first, second = server.bodies
        assert _images_sent(kind, first) == []
        [(media, data)] = _images_sent(kind, second)
        assert media == "image/png"
        width, height = png_size(base64.b64decode(data)) or (0, 0)
        assert 0 < width <= MAX_EDGE and 0 < height <= MAX_EDGE
    [record] = [e.data for e in of_type(result.events, EventType.TOOL_RESULT)]
    assert "plotted" in record["content"] and "figure 'Growth': x 'day', y 'users'" in record["content"]
    assert record["images"][0]["alt"] == "figure 'Growth': x 'day', y 'users'"


async def test_a_server_that_takes_no_images_reads_a_line_naming_each(tmp_path: Path) -> None:
    from agent_kernel.models.openai import OpenAIModel

    with FakeProvider() as server:
        server.script(turn(calls=[("call_plot", "python", {"code": PLOT})]), turn("Done."))
        model = OpenAIModel("local", base_url=server.url + "/v1", api_key="x")  # a compatible server: no images by default
        agent = Agent(model, tools=["python"], permissions="bypass", working_dir=tmp_path, retry_base_delay=0.001)
        agent.tool_extras["namespace"] = {}
        await agent.run("Plot.")
        assert server.rejected == []
        second = server.bodies[1]
        assert _images_sent("openai-chat", second) == []
        [tool_message] = [m for m in second["messages"] if m["role"] == "tool"]
        assert "[image image/png" in tool_message["content"] and "figure 'Growth'" in tool_message["content"]


async def test_read_notebook_sends_image_outputs_as_images(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import io

    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.bar(["a", "b"], [1, 2])
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("plot()")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": base64.b64encode(buffer.getvalue()).decode(), "text/plain": "<Figure>"})]
    nb.cells = [cell]
    nbformat.write(nb, tmp_path / "plots.ipynb")
    with FakeProvider() as server:
        server.script(turn(calls=[("call_read", "read_notebook", {"path": "plots.ipynb"})]), turn("A bar chart."))
        agent = Agent(server.claude(), tools=["read_notebook"], working_dir=tmp_path, retry_base_delay=0.001)
        await agent.run("What does the notebook show?")
        assert server.rejected == []
        [(media, _)] = _images_sent("anthropic", server.bodies[1])
        assert media == "image/png"


async def test_images_survive_the_journal_and_a_resume(tmp_path: Path) -> None:
    model = ScriptedModel([tool_call("python", {"code": PLOT}), "Done."])
    agent = Agent(model, tools=["python"], permissions="bypass", working_dir=tmp_path, journal=tmp_path / "journal")
    agent.tool_extras["namespace"] = {}
    await agent.run("Plot.")
    sent = model.requests[1].messages[-1].tool_results[0]
    assert len(sent.images) == 1 and sent.images[0].alt.startswith("figure 'Growth'")
    events = read_events(agent.journal.path)
    [record] = [e.data for e in events if e.type is EventType.TOOL_RESULT]
    assert record["images"][0]["data"] == sent.images[0].data
    agent.close()
    resumed = Agent.resume(agent.journal.path, model=ScriptedModel(["ok"]), tools=["python"])
    restored = [b for m in resumed.messages for b in m.content if isinstance(b, ToolResultBlock)]
    assert restored[0].images == sent.images


def test_a_tool_result_block_round_trips_with_its_images() -> None:
    block = ToolResultBlock("c1", "text", images=(ImageBlock("image/png", "AAAA", 2, 3, "figure"),))
    assert block_from_dict(dict(block_to_dict(block))) == block
    plain = ToolResultBlock("c2", "text")
    assert "images" not in block_to_dict(plain)  # text-only results keep their old shape


def test_large_images_are_scaled_to_the_cap_and_junk_is_refused() -> None:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (4000, 1000), "white").save(buffer, format="PNG")
    block = image_block("image/png", buffer.getvalue())
    assert block is not None and block.width == MAX_EDGE and block.height == round(1000 * MAX_EDGE / 4000)
    assert image_block("image/png", "not base64!!") is None
    assert image_block("image/tiff", b"II*\x00") is None
