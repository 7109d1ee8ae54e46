"""loop_config — ``LoopConfig``: how the loop calls the model and runs tools, and the instructions
it sends on its own (``continuation`` past ``max_tokens``, the tools-disabled final turn).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_kernel.models._base import Model
from agent_kernel.tools._output import DEFAULT_TOOL_RESULT_LIMIT
from agent_kernel.tools._registry import ToolRegistry

CONTINUE_INSTRUCTION = (
    "Your last response was cut off by the output token limit. Continue exactly where it stopped, "
    "without repeating anything."
)

FINAL_TURN_INSTRUCTION = (
    "You have reached the maximum number of turns for this request, so tools are now disabled. "
    "Answer now from what you already have: summarise what you found and what remains to be done."
)


@dataclass
class LoopConfig:
    """How the loop calls the model and runs tools (fixed for a run).

    Attributes:
        model: the model to call.
        tools: the tools offered.
        system: the system prompt.
        fallback_model: takes over when the model reports overload.
        max_retries: retries of a retryable model failure before giving up.
        retry_base_delay: first backoff in seconds (doubles each retry, with jitter).
        retry_max_delay: cap on one backoff.
        stall_timeout: seconds without a stream event before ``stall_detected`` (None: off).
        on_stall: ``retry``, ``abort`` or ``fallback``.
        max_parallel_tools: concurrency-safe calls running at once.
        model_options: passed to the model in every request (``max_tokens``, ...).
        tool_result_limit: characters of one tool result sent to the model; the whole output
            goes to a file in ``tool_output_dir`` (None: no cap).
        tool_output_dir: where capped tool outputs are kept in full.
        max_continuations: times a response cut off by ``max_tokens`` is asked to go on.
        on_tool_error: what a failed tool call does to the calls of the same response not
            started yet: ``"continue"`` (they run) or ``"cancel"`` (they never start, each
            answered with why). A tool's own ``on_error`` takes precedence.
        max_cost: the most a run may spend in US dollars (None: no cap). Before each model call
            the run ends with the reason ``budget`` if what it spent plus an estimate of that call
            (the last call's cost) would pass the cap, or if a call's cost is unknown.
    """

    model: Model
    tools: ToolRegistry = field(default_factory=ToolRegistry)
    system: str | None = None
    fallback_model: Model | None = None
    max_retries: int = 4
    retry_base_delay: float = 1.0
    retry_max_delay: float = 30.0
    stall_timeout: float | None = 30.0
    on_stall: str = "retry"
    max_parallel_tools: int = 10
    model_options: dict[str, Any] = field(default_factory=dict)
    tool_result_limit: int | None = DEFAULT_TOOL_RESULT_LIMIT
    tool_output_dir: Path | None = None
    max_continuations: int = 3
    on_tool_error: str = "continue"
    max_cost: float | None = None


