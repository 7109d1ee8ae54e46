"""A process that dies while a tool call waits for approval (``test_durable_approvals``).

Run as ``python -m tests.durable_child BASE_URL JOURNAL [--subagent]``: an agent on the Anthropic
SDK asks the fake provider at ``BASE_URL`` for a turn, which calls ``deploy``; default mode asks a
person, who never answers, so the process waits until the test kills it. With ``--subagent`` the
agent delegates to a ``deployer`` sub-agent (the same SDK and provider), whose ``deploy`` call
waits instead. ``deploy`` appends its target to the file named by ``DEPLOY_LOG``, so the test
counts how often it really ran.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from agent_kernel import Agent, tool
from agent_kernel.models.anthropic import AnthropicModel


@tool
def deploy(target: str) -> str:
    """Deploys to a target."""
    with open(os.environ["DEPLOY_LOG"], "a", encoding="utf-8") as log:
        log.write(target + "\n")
    return f"deployed {target}"


def claude(base_url: str) -> AnthropicModel:
    """The model both processes use: the real SDK against the fake endpoint."""
    return AnthropicModel("claude-sonnet-4-6", base_url=base_url, api_key="sk-ant-test")


def deployer(base_url: str) -> Agent:
    """The sub-agent that deploys (its calls go through the lead's permission gate)."""
    return Agent(claude(base_url), tools=[deploy], name="deployer", system="You deploy.", journal=None, context=None)


async def main(base_url: str, journal: str, subagent: bool = False) -> None:
    tools = [deployer(base_url).as_tool()] if subagent else [deploy]
    agent = Agent(claude(base_url), tools=tools, journal=journal, working_dir=Path(journal).parent)
    agent.approvals.interactive = True  # a person is asked, and never answers
    await agent.run("Deploy to staging.")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], "--subagent" in sys.argv[3:]))
