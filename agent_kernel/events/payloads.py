"""payloads — the ``data`` of every event type, as one ``TypedDict`` each.

An event's ``data`` is a plain JSON-serialisable dict: the journal writes it as it is, and the
fast journal reader depends on that. These types document it and let a type checker follow the
keys from the loop that emits them to the view and the frames that read them.
``agent_kernel.events.PAYLOADS`` maps each ``EventType`` to its type, and ``docs/events.md`` is
generated from this module by ``scripts/write_events_doc.py``.

Each class docstring says when the event fires; each key's comment says what it holds. A key
marked ``NotRequired`` appears only in the cases its comment names.
"""

# No ``from __future__ import annotations`` here: TypedDict must see ``NotRequired`` at class
# creation to tell optional keys from required ones.
import sys
from typing import Any

from typing_extensions import NotRequired, TypedDict

from agent_kernel.messages import BlockDict, ImageDict, MessageDict

__all__ = [
    "ApprovalDecision",
    "ApprovalRequired",
    "BlockDict",
    "Cancelled",
    "CompactionComplete",
    "CompactionFallback",
    "CompactionRetry",
    "CompactionStart",
    "ContextAdded",
    "ContextAssembled",
    "ContextUsage",
    "ContextWarning",
    "Continuation",
    "CrewState",
    "CrewTask",
    "Error",
    "IterationStart",
    "LlmComplete",
    "LlmStart",
    "MaxIterationsReached",
    "McpConnect",
    "McpElicitation",
    "McpError",
    "McpResource",
    "McpSampling",
    "McpToolsListed",
    "McpWarning",
    "MemoryLoaded",
    "MemoryRecall",
    "MemorySaved",
    "MemoryWarning",
    "MemoryWriteComplete",
    "MemoryWriteStart",
    "MessageDict",
    "MicroCompaction",
    "ModelFallback",
    "NotebookEdit",
    "NotebookRun",
    "Paused",
    "PlanMode",
    "Recursion",
    "Resumed",
    "Retry",
    "RunFinish",
    "RunStart",
    "SessionMemoryUpdate",
    "StallDetected",
    "StateChange",
    "StatsDict",
    "Steer",
    "SubagentFinish",
    "SubagentReport",
    "SubagentStart",
    "SystemReminder",
    "TaskCondition",
    "TextDelta",
    "ThinkingDelta",
    "TodoUpdate",
    "ToolCallDelta",
    "ToolCallReady",
    "ToolCallStart",
    "ToolProgress",
    "ToolResult",
    "ToolStart",
    "TurnStateDict",
    "UsageDict",
    "events_markdown",
]

# ---- shapes shared by several payloads -------------------------------------------------------


class TurnStateDict(TypedDict):
    """A ``TurnState`` as ``TurnState.to_dict`` writes it."""

    turn_counter: int  # the iteration, from 0
    turn_id: str  # unique per turn
    max_iterations: int | None  # the run's turn limit (None: no limit)
    compacted: bool  # the history was compacted during this turn
    parent_turn_id: str | None  # the previous turn, or the turn that spawned a sub-agent
    metadata: dict[str, Any]  # what hooks attached to the turn


class UsageDict(TypedDict):
    """Token counts of one model call (or a sum of them), as ``Usage.to_dict`` writes them."""

    input_tokens: int  # tokens sent
    output_tokens: int  # tokens generated
    cache_read_tokens: int  # input tokens read from the provider's prompt cache
    cache_write_tokens: int  # input tokens written to it


class StatsDict(TypedDict):
    """A run's ``LoopStats``, as ``LoopStats.to_dict`` writes them."""

    turns: int  # turns of the loop
    llm_calls: int  # model calls, compaction summaries included
    tool_calls: int  # tool calls answered
    input_tokens: int  # tokens sent, in all calls
    output_tokens: int  # tokens generated, in all calls
    cache_read_tokens: int  # input tokens read from prompt caches
    cache_write_tokens: int  # input tokens written to them
    cost_usd: float | None  # None when a model's price is unknown
    start: float  # epoch seconds
    end: float | None  # epoch seconds (None while running)
    duration: float | None  # seconds
    errors: NotRequired[int]  # failed model attempts (retried or not) and tool calls that ended in an error


class CrewTask(TypedDict):
    """One task of a crew, as its ``run_start`` lists it."""

    name: str  # the task's name
    agent: str | None  # the member that does it (None: the manager assigns it)
    depends_on: list[str]  # tasks whose outputs it needs
    description: str  # what it asks for


# ---- the run -----------------------------------------------------------------------------------


class Continues(TypedDict):
    """The interrupted turn a run finishes (``Agent.continue_run`` after ``Agent.resume``)."""

    run_id: str  # the run the turn belonged to
    call_ids: list[str]  # the turn's tool calls, answered by this run's ``recursion``


class RunStart(TypedDict):
    """A run begins: ``Agent.run``/``stream``, a sub-agent's run, or a crew's."""

    prompt: str | None  # what the user asked (a crew's inputs, which may be None)
    model: str | None  # the model's name (a crew without a manager: None)
    agent_name: str | None  # the agent's display name
    turn_state: TurnStateDict  # the first turn
    provider: NotRequired[str]  # agents: the model's provider
    system: NotRequired[str | None]  # agents: the system prompt
    tools: NotRequired[list[str]]  # agents: the tools the model may call
    max_iterations: NotRequired[int | None]  # agents: turns before the tools-disabled final answer (None: no limit)
    mode: NotRequired[str]  # crews: sequential, parallel or hierarchical
    state: NotRequired[dict[str, Any]]  # crews with a shared state: the state at the start
    agents: NotRequired[list[str]]  # crews: the members' names
    tasks: NotRequired[list[CrewTask]]  # crews: the tasks in declared order
    continues: NotRequired[Continues]  # agents: this run finishes a turn a dead process left open
    max_cost: NotRequired[float]  # agents with a spending cap: the most the run may spend, in US dollars
    notebook: NotRequired[str]  # agents: the notebook whose kernel ran it (Jupyter's JPY_SESSION_NAME)


class IterationStart(TypedDict):
    """A turn of the loop begins (one model call and the tool calls it asks for)."""

    turn_state: TurnStateDict  # the turn that begins


class Recursion(TypedDict):
    """A turn's tool results are in the conversation; the loop goes on with the next turn."""

    tool_results: list[BlockDict]  # the tool_result blocks sent back, in the model's order
    next_turn_id: str  # the turn that follows


class MaxIterationsReached(TypedDict):
    """The tools-disabled final answer at ``max_iterations`` has been given."""

    max_iterations: int  # the turn limit that was reached


class Steer(TypedDict):
    """A message steered into the running conversation (``agent.steer``) joins it as a user
    message at a turn boundary; the model reads it in its next call."""

    text: str  # the message, as the person sent it


class Paused(TypedDict):
    """The run holds at a turn boundary (``agent.pause``) until ``agent.resume_run`` or a cancel."""

    steers: int  # messages steered in and waiting to be delivered when the run goes on


class Resumed(TypedDict):
    """A paused run goes on."""

    paused_s: float  # how long it was held


class Cancelled(TypedDict):
    """The run was cancelled (``agent.cancel``, Stop, a kernel interrupt, a closed stream)."""

    reason: str  # why, as the canceller said it
    phase: str  # the loop state it was in (calling_llm, executing_tools, ...)
    # A resumed agent asks again where an approval was pending (``Agent.cancel``).
    keeps_calls_open: NotRequired[bool]  # the process was going down (a kernel shutting down): the turn's calls stay open
    # Python cannot kill a thread: such a call's result is discarded when it ends.
    still_running: NotRequired[list[dict[str, str]]]  # calls whose sync work (a thread) still ran at the end: [{"call_id", "name"}]


class Error(TypedDict):
    """Something failed. Unless ``fatal`` is False the run failed: ``run_finish`` (``error``) follows.

    A non-fatal error (``kind`` approver or tampering) refused one tool call, whose ``tool_result``
    says so to the model; the run goes on, and the person sees the error as a notice.
    """

    message: str  # what went wrong, for a person
    kind: str  # a short label: rate_limit, context_length, auth, stream_cut, crew, mcp, hook, approver, tampering, journal (its file cannot be written), ...
    status_code: int | None  # the provider's HTTP status, when there was one
    server: NotRequired[str]  # kind mcp: the MCP server that failed
    fatal: NotRequired[bool]  # False: the run goes on (absent: the run ends with reason error)
    call_id: NotRequired[str]  # kinds approver and tampering: the tool call that was refused
    tool: NotRequired[str]  # kinds approver and tampering: that call's tool
    approver: NotRequired[str]  # kind approver: the callback's name
    returned: NotRequired[str]  # kind approver: the repr of what it returned, when it returned a non-decision
    changed: NotRequired[list[str]]  # kind tampering: the sealed settings found changed (and restored)


class RunFinish(TypedDict):
    """The run ended; always the last event of a run."""

    reason: str  # a TerminationReason value: end_turn, max_turns, stop_reason, user_interrupt, error, tool_stop, budget
    text: str  # the final answer (what streamed, for an interrupted run)
    stats: StatsDict  # the run's turns, calls, tokens, cost and duration
    stop_reason: NotRequired[str]  # the model's own stop reason, when the model ended the run
    error: NotRequired[str]  # reason error: the message
    tool: NotRequired[str]  # reason tool_stop: the tool that stopped the run
    stop: NotRequired[str]  # a hook or tool stopped the run: why
    outputs: NotRequired[list[dict[str, Any]]]  # crews: each task's output (TaskOutput.to_dict)
    state: NotRequired[dict[str, Any]]  # crews: the shared state at the end (crew.state)
    background_cancelled: NotRequired[list[str]]  # background sub-agents still running when the run ended otherwise than by its answer, cancelled (their ids)
    max_cost: NotRequired[float]  # reason budget: the cap in US dollars
    next_cost_estimate: NotRequired[float | None]  # reason budget: what the refused call was estimated to cost (None: unknown)


# ---- context management --------------------------------------------------------------------


class ContextAssembled(TypedDict):
    """The request for this turn is assembled within the context budget."""

    total_tokens: int  # estimated input tokens of the request
    budget: int  # tokens the request may use
    threshold: int  # tokens at which auto-compaction starts
    window: int  # the model's context window
    messages: int  # messages sent
    messages_hidden: int  # messages left out to fit the budget
    components: list[dict[str, Any]]  # the parts (system, tools, pinned context by name, history): name, priority, truncatable, status, tokens, requested_tokens
    fits: NotRequired[bool]  # total_tokens fits the window; false only on a request refused as too large (journals before it lack the key)


class ContextAdded(TypedDict):
    """Text an ``after_context_assembly`` hook added to one request, placed in what the window had left."""

    room: int  # tokens the window had left after assembly
    total_tokens: int  # estimated input tokens of the request with what was kept
    window: int  # the model's context window
    components: list[dict[str, Any]]  # one per text, as in context_assembled: name, status, tokens, requested_tokens, ...


class ContextUsage(TypedDict):
    """How full the context window is for one model call (``llm_complete``'s ``context_usage``)."""

    used_tokens: int  # the call's input tokens (reported by the provider; estimated when it reported none)
    window: int  # the model's context window
    share: float  # used_tokens / window
    estimated: bool  # true when used_tokens is the estimate, not the provider's count


class ContextWarning(TypedDict):
    """The request passed the warning share of the window (once per crossing), before auto-compaction or overflow."""

    used_tokens: int  # estimated input tokens of the request
    window: int  # the model's context window
    share: float  # used_tokens / window
    warn_at: float  # the warning share (ContextManager(warn_threshold=...))
    compact_at: float | None  # the share at which auto-compaction starts (None: it is off)
    message: str  # what is about to happen and what to do


class MicroCompaction(TypedDict):
    """Old tool results were replaced by placeholders (the journal keeps them whole)."""

    results_cleared: int  # this time
    tokens_saved: int  # this time (estimated)
    total_results_cleared: int  # in the session so far
    total_tokens_saved: int  # in the session so far (estimated)
    trigger: NotRequired[str]  # manual (agent.compact) or overflow (the provider said too long)
    reason: NotRequired[str]  # overflow: the provider's message


class CompactionStart(TypedDict):
    """Auto-compaction begins: the conversation will be summarised by a model."""

    trigger: str  # auto, manual or overflow
    tokens_before: int  # estimated input tokens before compaction
    threshold: int  # tokens at which auto-compaction starts
    messages: int  # messages in the conversation
    focus: str | None  # agent.compact(focus): what the summary should keep


class CompactionRetry(TypedDict):
    """A summary call failed and will be tried again."""

    attempt: int  # the retry's number, from 1
    delay_s: float  # seconds before it is tried again
    error: str  # why the summary call failed


class CompactionFallback(TypedDict):
    """Summaries failed; the oldest messages were dropped instead (a sliding window)."""

    error: str  # why the last summary call failed
    messages_removed: int  # oldest messages dropped
    tokens_after: int  # estimated input tokens afterwards


class CompactionComplete(TypedDict):
    """The conversation was compacted."""

    trigger: str  # auto, manual or overflow
    summary: str  # the summary that now stands for the removed messages ("" for a fallback)
    tokens_before: int  # estimated input tokens before
    tokens_after: int  # estimated input tokens after
    messages_removed: int  # messages the summary replaced
    kept_messages: int  # recent messages kept as they were
    fallback: bool  # true when a sliding window replaced the summary
    model: str  # the model that wrote the summary
    usage: UsageDict | None  # the summary call's tokens
    cost_usd: float | None  # the summary call's cost (None: unknown price)
    source: str  # model (a summary call), session_memory (the running summary, no call) or fallback
    restored: NotRequired[str]  # the block restored behind the summary: the todo list and recently read files
    restored_files: NotRequired[list[dict[str, Any]]]  # restored files, newest read first: {"path", "tokens", "cut"}
    restored_todos: NotRequired[int]  # todo items restored


# ---- the model call ------------------------------------------------------------------------


class LlmStart(TypedDict):
    """A model call (one streaming attempt) begins."""

    model: str  # the model's name
    provider: str  # anthropic, openai, offline, scripted, ...
    attempt: int  # 0 for the first attempt, then 1, 2, ... after retries
    messages: int  # messages in the request
    tools_enabled: bool  # false for the final answer at max_iterations
    hook_context: NotRequired[list[str]]  # extra context after_context_assembly hooks added to the request
    request_replaced: NotRequired[bool]  # a before_llm_call hook replaced the request (or its messages)
    sent: NotRequired[dict[str, Any]]  # with request_replaced, what was sent as a diff: kept_messages, messages (the rest, as sent), system, tools, options (if changed), messages_before


class TextDelta(TypedDict):
    """Answer text streamed by the model (the journal may coalesce consecutive deltas)."""

    text: str  # the fragment


class ThinkingDelta(TypedDict):
    """Reasoning streamed by the model."""

    text: str  # the fragment
    signature: str | None  # set on the block's last delta when the provider signs it


class ToolCallStart(TypedDict):
    """The model began a tool call."""

    call_id: str  # the provider's id for the call
    name: str  # ``unnamed_tool`` when the model gave none
    index: int  # the call's position in the response


class ToolCallDelta(TypedDict):
    """A fragment of a tool call's JSON arguments."""

    call_id: str | None  # the call it belongs to (None if its start was not seen)
    index: int  # the call's position in the response
    delta: str  # the fragment of JSON text


class ToolCallReady(TypedDict):
    """A tool call is complete; safe tools start now, others once the response is whole."""

    call_id: str  # the provider's id for the call
    name: str  # the tool (``unnamed_tool`` when the model gave none)
    arguments: dict[str, Any]  # parsed; ``{"_raw": text}`` when they were not valid JSON
    index: int  # the call's position in the response
    parse_error: NotRequired[str]  # why the arguments are not a JSON object


class LlmComplete(TypedDict):
    """A model call ended with a whole response."""

    model: str  # the model that answered (the fallback, after a fallback)
    message: MessageDict  # the assistant message added to the conversation
    stop_reason: str  # end_turn, tool_use, max_tokens, refusal, ...
    usage: UsageDict  # tokens the provider reported (estimated by offline models; zeros if none)
    cost_usd: float | None  # None when the price is unknown or the provider reported no usage
    duration_s: float  # seconds from the first attempt to the end of the stream
    attempts: int  # attempts this call took, retries included
    cache_hit: NotRequired[bool]  # the provider read part of the prompt from its cache (usage.cache_read_tokens > 0); absent when no usage was reported
    context_usage: NotRequired[ContextUsage]  # how full the window was for this call (absent when no window is known)


class Continuation(TypedDict):
    """A response cut off by ``max_tokens`` is asked to go on."""

    attempt: int  # 1 for the first continuation
    max_continuations: int  # the most continuations asked for in one turn
    instruction: str  # the user message sent to ask for it


class Retry(TypedDict):
    """A model call failed and will be tried again after ``delay_s``."""

    attempt: int  # the retry's number, from 1
    max_retries: int  # retries allowed
    delay_s: float  # seconds waited before it (retry-after and backoff, capped by retry_max_delay)
    error: str  # what failed
    kind: str  # rate_limit, server, overloaded, stream_cut, stall, connection, ...
    status_code: int | None  # the provider's HTTP status, when there was one
    partial: bool  # something had streamed before it failed (it is discarded)
    retry_after_s: NotRequired[float]  # the server asked for longer than retry_max_delay


class ModelFallback(TypedDict):
    """The model was overloaded; the fallback model takes over."""

    from_model: str  # the overloaded model
    to_model: str  # the fallback model
    reason: str  # the error that triggered it
    kind: str  # the error's kind (overloaded, stall, ...)
    partial: bool  # something had streamed before it failed (it is discarded)


class StallDetected(TypedDict):
    """Nothing arrived from the model for ``seconds``, not even a keep-alive."""

    seconds: float  # the stall timeout that passed
    action: str  # retry, abort or fallback
    model: str  # the silent model
    partial: bool  # something had streamed before the silence (it is discarded)


# ---- tools and approvals ---------------------------------------------------------------------


class ApprovalRequired(TypedDict):
    """A tool call waits for a decision (a person, a callback or the headless policy)."""

    call_id: str  # the call that waits
    tool: str  # the tool's name
    arguments: dict[str, Any]  # the exact arguments the tool would run with
    key: str  # the rule string an "Always allow" would add, e.g. ``bash(git status)``
    rule: str | None  # the ask rule that matched, if any
    reason: str  # why it asks, for a person
    policy: NotRequired[str]  # the headless policy that will answer
    timeout_s: NotRequired[float]  # with an approval timeout: seconds the call waits for a decision
    expires_at: NotRequired[float]  # with an approval timeout: epoch seconds when it is rejected unanswered
    server: NotRequired[str]  # MCP tools: the server
    mcp_tool: NotRequired[str]  # MCP tools: the tool's name on its server
    destructive: NotRequired[bool]  # MCP tools: judged destructive (an untrusted server's "not destructive" is not believed)
    read_only: NotRequired[bool]  # MCP tools: judged read-only (only a trusted server's readOnlyHint counts)
    claims_read_only: NotRequired[bool]  # MCP tools: the server's readOnlyHint, as claimed
    trusted: NotRequired[bool]  # MCP tools: the person marked the server trusted
    file: NotRequired[dict[str, Any]]  # file writes: the file the card shows (path, and device/inode or absent)
    preview: NotRequired[str]  # what the call would change (edit_notebook: the cell's new source, a diff for a replace)


class ApprovalDecision(TypedDict):
    """A tool call was approved or rejected."""

    call_id: str  # the call decided
    tool: str  # the tool's name
    decision: str  # approve, approve_edited, reject or always_allow
    decided_by: str  # rule, mode, hook, callback, person, policy, or timeout (nobody answered in time)
    reason: str | None  # a rejection's reason, which the model reads
    wait_s: float  # how long the decision took
    arguments: NotRequired[dict[str, Any]]  # approve_edited: the arguments the call runs with, as the person edited them
    rule_added: NotRequired[str]  # always_allow: the allow rule added for the rest of the session


class ToolStart(TypedDict):
    """A tool begins running."""

    call_id: str  # the call
    name: str  # the tool
    arguments: dict[str, Any]  # as validated (or as edited by the approver)
    started_at: float  # epoch seconds


class ToolProgress(TypedDict):
    """A running tool reported progress (``ToolContext.progress``)."""

    call_id: str  # the running call
    name: str  # the tool
    message: str  # what the tool is doing
    fraction: float | None  # 0..1 when the tool knows


class ToolResult(TypedDict):
    """A tool call's result, as the model will read it (capped, redacted)."""

    call_id: str  # the call it answers
    name: str  # the tool
    content: str  # what the model reads (a preview and a file path past the result cap)
    is_error: bool  # the call failed, was refused or was cancelled
    started_at: float | None  # None when it never ran (refused, unknown, cancelled)
    ended_at: float | None  # epoch seconds (None when it never ran)
    duration_s: float | None  # seconds it ran (None when it never ran)
    synthetic: NotRequired[bool]  # made by the loop for a call that could not finish
    images: NotRequired[list[ImageDict]]  # pictures the result shows (a plot), capped and scaled for models


# ---- sub-agents -----------------------------------------------------------------------------------


class SubagentStart(TypedDict):
    """A sub-agent (``task`` tool, ``as_tool``, a crew member) begins; its events follow."""

    agent_id: str  # the sub-agent's id, also on each of its events
    name: str  # its display name
    model: str  # its model's name
    prompt: str  # what it was asked
    parent_agent_id: str | None  # the agent that started it (None: the top level)
    parent_call_id: str | None  # the parent's tool call that started it
    parent_turn_id: str | None  # the parent's turn that started it (None outside a turn)
    task: NotRequired[str]  # crews: the task's name
    continues: NotRequired[bool]  # a continued run picks it up inside the turn a dead process left open


class SubagentFinish(TypedDict):
    """A sub-agent ended; its usage is part of the parent's."""

    agent_id: str  # the sub-agent's id
    name: str  # its display name
    reason: str  # its run's TerminationReason
    text: str  # its final answer, which the parent's tool call returns
    error: str | None  # its error, if it failed
    turns: int  # turns it took
    tool_calls: int  # tool calls it made
    usage: UsageDict  # its tokens (its own sub-agents included)
    cost_usd: float | None  # its cost (None: unknown price)
    duration_s: float  # seconds it ran
    parent_agent_id: str | None  # the agent that started it (None: the top level)
    parent_call_id: str | None  # the parent's tool call it answers


# ---- MCP servers ------------------------------------------------------------------------------


class McpConnect(TypedDict, total=False):
    """An MCP server connected (on first use, or again after a crash)."""

    server: str  # the server's name in this agent
    transport: str  # stdio or http
    target: str  # the command or URL
    server_name: str | None  # the name the server gives itself
    server_version: str | None  # the version it reports
    protocol_version: str | None  # the MCP protocol version agreed
    duration_s: float  # seconds connecting took
    reconnect: bool  # true when it connects again after a failure


class McpToolsListed(TypedDict, total=False):
    """An MCP server's tools, resources and prompts were listed."""

    server: str  # the server's name in this agent
    tools: list[str]  # its tools, as the agent names them (``mcp__server__tool``)
    resources: list[str]  # its resource URIs
    prompts: list[str]  # its prompt names


class McpWarning(TypedDict, total=False):
    """An MCP tool was skipped (a malformed schema, say)."""

    server: str  # the server's name in this agent
    tool: str  # the tool skipped
    message: str  # why


class McpError(TypedDict, total=False):
    """An MCP server failed to start or a call to it failed; an ``error`` of kind mcp follows."""

    server: str  # the server's name in this agent
    phase: str  # connect or call
    message: str  # what failed
    stderr_tail: str  # the server's last words on stderr


class McpElicitation(TypedDict, total=False):
    """An MCP server asked the user a question (elicitation) and got an answer."""

    server: str  # the server that asked
    message: str  # its question
    schema: dict[str, Any]  # the JSON schema of the answer it wants
    action: str  # accept, decline or cancel
    content: dict[str, Any] | None  # the answer given (accept only)
    reason: str | None  # why it was declined or cancelled, when known


class McpResource(TypedDict, total=False):
    """An MCP resource mentioned in the prompt (``@server:uri``, or ``%%agent --resource``) was read and attached to it."""

    server: str  # the server it came from
    uri: str  # the resource's URI
    mime_type: str | None  # its MIME type, when the server gives one
    chars: int  # characters of its text before the cap
    capped: bool  # true when it was longer than the tool-result limit and cut (the whole text is in the session's folder)


class McpSampling(TypedDict, total=False):
    """An MCP server asked the agent's model for a completion (sampling), and was answered or refused."""

    server: str  # the server that asked
    messages: list[str]  # its messages, one "role: text" line each (long ones shortened)
    system_prompt: str | None  # the system prompt it asked for
    max_tokens: int | None  # the most tokens it asked for
    action: str  # accept (the model answered) or decline
    model: str | None  # the model that answered (accept only)
    text: str | None  # the answer sent back (accept only)
    usage: UsageDict | None  # the model call's tokens (accept only; None: the model reported none)
    cost_usd: float | None  # its cost, added to the run's (None: declined, or the price is unknown)
    stop_reason: str | None  # why the model stopped (accept only)
    duration_s: float | None  # how long the model took (accept only)
    reason: str | None  # why it was declined, or which option allowed it


# ---- memory ------------------------------------------------------------------------------------


class MemoryLoaded(TypedDict):
    """At session start the long-term memory and AGENTS.md were read and added to the system prompt."""

    path: str  # the memory file
    keys: list[str]  # the memories loaded, by key, oldest first (the newest that fit)
    entries: int  # how many
    left_out: int  # older memories not loaded, for want of room (the memory tool recalls them)
    agents_md: str | None  # the AGENTS.md read (None: there is none)
    chars: int  # characters added to the system prompt
    text: str  # the exact block added to the system prompt


class MemoryRecall(TypedDict):
    """The memory tool recalled memories."""

    query: str  # the words looked for ("" recalls every memory)
    keys: list[str]  # the memories found, best first
    path: str  # the memory file


class MemoryWriteStart(TypedDict):
    """The memory tool begins to change the long-term memory."""

    op: str  # remember or forget
    key: str  # the memory's key
    path: str  # the memory file


class MemorySaved(TypedDict):
    """The memory file was written (atomically, the previous version kept as a backup)."""

    path: str  # the memory file
    entries: int  # memories it holds now
    bytes: int  # its size
    backup: str | None  # the backup of the previous version (None: there was none)


class MemoryWriteComplete(TypedDict):
    """A change to the long-term memory is done."""

    op: str  # remember or forget
    key: str  # the memory's key
    existed: bool  # the key was there before (remember replaced it; forget removed it)
    entries: int  # memories held now


class MemoryWarning(TypedDict):
    """The memory file could not be read; it was moved aside and memory started empty."""

    path: str  # the memory file
    moved_to: str | None  # where the unreadable file is now (None: it could not be moved, memory is off until it is)
    message: str  # what went wrong and how to recover


class NotebookEdit(TypedDict):
    """A notebook tool changed a notebook (``edit_notebook``; ``undo`` when a run's edits were reverted)."""

    path: str  # the notebook, relative to the working directory
    action: str  # insert, replace, delete or undo
    cell_id: str  # the cell changed (inserted, replaced, deleted)
    index: int  # its index (before a delete, after an insert)
    cell_type: str  # code, markdown or raw
    source: str | None  # the cell's new source (None for a delete)
    previous: dict[str, Any] | None  # the whole cell before the change (None for an insert): what undo puts back
    call_id: str  # the tool call that made it
    live: bool  # the open notebook shows the change now (False: the file changed; the open notebook needs a reload)
    fingerprint: str  # sha256 of the file as written
    undoes: NotRequired[str]  # undo: the run whose edits were reverted


class NotebookRun(TypedDict):
    """``run_cell`` ran a code cell."""

    path: str  # the notebook, relative to the working directory
    cell_id: str  # the cell run
    index: int  # its index
    mode: str  # in_process (the kernel running the agent, the user's namespace) or kernel (one started for the file)
    status: str  # ok, error, timeout or cancelled
    execution_count: int | None  # the count written into the notebook
    outputs: int  # how many outputs it produced
    images: int  # how many of them are images
    error: str | None  # "ename: evalue" when it failed
    duration_s: float  # seconds it ran
    call_id: str  # the tool call that ran it
    live: NotRequired[bool]  # the open notebook shows the outputs now (False: they went to the saved file)


class TodoUpdate(TypedDict):
    """The agent replaced its todo/plan list (``todo_write``)."""

    todos: list[dict[str, str]]  # the items in order: {"content", "status"}
    pending: int  # items pending
    in_progress: int  # items in progress
    completed: int  # items completed


class SessionMemoryUpdate(TypedDict):
    """Between turns, the session-memory summary was brought up to date (one model call)."""

    summary: str  # the summary now ("" when the update failed)
    messages_covered: int  # it stands for this many messages from the start of the conversation
    messages_added: int  # messages summarised by this update
    fingerprint: str  # digest of the messages it stands for; a compaction uses it only while they are unchanged
    model: str | None  # the model that wrote it
    usage: UsageDict | None  # the call's tokens
    cost_usd: float | None  # the call's cost (None: unknown price)
    error: NotRequired[str]  # the update failed: why (the previous summary stays)
    duration_s: NotRequired[float]  # seconds the call took
    background: NotRequired[bool]  # True: it ran beside the run's turns (a top-level run), delaying none of them


class SystemReminder(TypedDict):
    """Before a prompt the agent was told what changed in the notebook; ``text`` joined the prompt's message."""

    text: str  # the reminder, as the model reads it
    variables: list[dict[str, str]]  # {"name", "change" (new, changed, removed), "description" (type and shape)}
    files: list[str]  # files the agent read that changed on disk since
    todos: int  # todo items listed


# ---- the loop's phases, plan mode, background work and crews ------------------------------------


class StateChange(TypedDict):
    """The loop moved to another phase (``LoopState``); ``on_state_change`` callbacks saw the same."""

    old: str  # the phase it left: idle, receiving_input, checking_context, calling_llm, processing_response, executing_tools
    new: str  # the phase it entered (completed or error at the end)


class PlanMode(TypedDict):
    """The run is in plan mode (read-only tools only), or has left it; refused calls show as
    ``approval_decision`` events decided by ``mode``."""

    active: bool  # True: plan mode now holds (a run starting in it, or switched to it); False: it was left
    mode: str  # the permission mode now


class SubagentReport(TypedDict):
    """A background sub-agent's answer joined the parent's conversation as a message, at a turn boundary."""

    agent_id: str  # the sub-agent's id (its subagent_start and subagent_finish carry it too)
    name: str  # its display name
    call_id: str | None  # the parent's tool call that started it
    reason: str  # its run's TerminationReason
    text: str  # the message the parent's model reads


class CrewState(TypedDict):
    """An agent of a crew wrote a value into the crew's shared state (``crew.state``)."""

    key: str  # the key written
    value: Any  # the value now (JSON)
    task: str | None  # the task whose agent wrote it (None: set from code)
    agent_id: str | None  # that agent's id


class TaskCondition(TypedDict):
    """A crew task's ``when`` condition was read: it runs only when it holds."""

    task: str  # the task's name
    runs: bool  # the condition held (False: the task is skipped, and the tasks that depend on it)


# ---- docs/events.md ------------------------------------------------------------------------------


def events_markdown() -> str:
    """``docs/events.md``: every event type, when it fires, its keys and their meaning."""
    import inspect
    import typing

    from agent_kernel.events._event import PAYLOADS

    # The shapes of messages (BlockDict, MessageDict, ImageDict) are documented where they are defined.
    source = inspect.getsource(sys.modules[__name__]) + inspect.getsource(sys.modules["agent_kernel.messages"])
    lines = [
        "# Events",
        "",
        "Every event is an `AgentEvent` (`seq`, `ts`, `session_id`, `run_id`, `turn_id`,",
        "`parent_turn_id`, `iteration`, `type`, `data`, `agent_id`). This page lists each `type`",
        "and the keys of its `data`. It is generated from `agent_kernel/events/payloads.py` by",
        "`scripts/write_events_doc.py`; a test keeps it current.",
        "",
    ]
    for event_type, payload in PAYLOADS.items():
        lines += [f"## `{event_type.value}`", "", (inspect.getdoc(payload) or "").strip(), ""]
        lines += ["| key | type | meaning |", "|---|---|---|"]
        hints = typing.get_type_hints(payload)
        for key in payload.__annotations__:
            optional = key in getattr(payload, "__optional_keys__", ())
            kind = _type_name(hints[key]).replace("|", "\\|")
            lines.append(f"| `{key}`{' (optional)' if optional else ''} | `{kind}` | {_comment(source, payload.__name__, key)} |")
        lines.append("")
    lines += ["# Shapes used above", ""]
    for shape in (TurnStateDict, UsageDict, StatsDict, MessageDict, BlockDict, ImageDict, CrewTask):
        lines += [f"## `{shape.__name__}`", "", (inspect.getdoc(shape) or "").strip(), ""]
        lines += ["| key | type | meaning |", "|---|---|---|"]
        hints = typing.get_type_hints(shape)
        shape_source = source if shape.__module__ == __name__ else inspect.getsource(sys.modules[shape.__module__])  # MessageDict, BlockDict: messages
        for key in shape.__annotations__:
            kind = _type_name(hints[key]).replace("|", "\\|")
            lines.append(f"| `{key}` | `{kind}` | {_comment(shape_source, shape.__name__, key)} |")
        lines.append("")
    return "\n".join(lines)


def _type_name(hint: Any) -> str:
    if isinstance(hint, type) and not getattr(hint, "__args__", None):
        return hint.__name__
    text = repr(hint).replace("typing.", "").replace("typing_extensions.", "").replace("agent_kernel.events.payloads.", "").replace("agent_kernel.messages.", "")
    return text.replace("<class '", "").replace("'>", "").replace("NoneType", "None")


def _comment(source: str, cls: str, key: str) -> str:
    """The ``# ...`` comment on ``key``'s line in class ``cls``."""
    body = source.split(f"class {cls}(", 1)[1].split("\nclass ", 1)[0]
    for line in body.splitlines():
        if line.strip().startswith(f"{key}:") and "#" in line:
            return line.split("#", 1)[1].strip().replace("|", "\\|")
    return ""

