"""agent_settings — ``AgentSettings``: every setting ``Agent`` takes, declared once, and checked when given.

Each field says a setting's type, its default, what it accepts (pydantic checks it, so a setting of
the wrong kind, ``max_iterations="5"`` or ``tools="read_file"``, is refused when given, not deep
inside a run with a message about something the person never wrote), its documentation, and how
``Agent.fork`` carries it over. Everything else reads this one list:

- ``Agent(...)`` is typed from the fields (``typed_as_settings``), so type checkers and IDEs see
  each setting with its type and default, and checks its arguments with ``AgentSettings.given``;
- assigning a loop setting later (``agent.stall_timeout = 10``, ``agent_parts.LoopSetting``) is
  checked by the same field (``AgentSettings.checked``);
- the agent's ``LoopConfig`` takes the fields it shares with it (``AgentSettings.loop_config``);
- a fork gets each setting the agent has now unless overridden (``AgentSettings.carried``).

A refused value is a ``UserError`` naming the setting, the value and what the setting takes; an
unknown setting names the one meant. pydantic's own ``ValidationError`` never reaches the person.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import textwrap
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Concatenate, Literal, ParamSpec

import pydantic
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SkipValidation
from pydantic_core import core_schema

from agent_kernel.errors import UserError, did_you_mean
from agent_kernel.journal._event_log import DEFAULT_KEEP_EVENTS
from agent_kernel.models._base import Model
from agent_kernel.runtime._config import LoopConfig
from agent_kernel.runtime._hooks import Hooks
from agent_kernel.runtime._state import LoopState
from agent_kernel.tools._output import DEFAULT_TOOL_RESULT_LIMIT
from agent_kernel.tools._registry import ToolRegistry
from agent_kernel.tools._tool import Tool

if TYPE_CHECKING:
    from agent_kernel.agent._agent import Agent


class _Default:
    def __repr__(self) -> str:
        return "<default>"


#: The default of a setting whose default is worked out from the others (``journal``, ``context``).
DEFAULT: Any = _Default()


@dataclasses.dataclass(frozen=True)
class Takes:
    """What a setting accepts, in words: the end of the message that refuses another value.

    With ``check``, it is also the test of a value pydantic's types cannot say (a list of tools
    but not a str, an open journal), and the value is kept as given, never converted.
    """

    words: str
    check: Callable[[Any], bool] | None = None

    def __get_pydantic_core_schema__(self, source: Any, handler: pydantic.GetCoreSchemaHandler) -> core_schema.CoreSchema:
        if self.check is None:
            return handler(source)
        check = self.check

        def validate(value: Any) -> Any:
            if not check(value):
                raise ValueError(self.words)
            return value

        return core_schema.no_info_plain_validator_function(validate)


@dataclasses.dataclass(frozen=True)
class Fork:
    """How ``Agent.fork`` gives its fork a setting that is not overridden: ``read(agent)``; without a
    ``Fork`` the agent's attribute of the setting's name. ``read`` None: the fork does not take it
    from the agent, and ``why`` says what it has instead."""

    read: Callable[[Agent], Any] | None
    why: str = ""


def _tool_list(value: Any) -> bool:
    return value is None or (isinstance(value, Iterable) and not isinstance(value, (str, bytes)))


def _server_list(value: Any) -> bool:
    return isinstance(value, Iterable) and not isinstance(value, (str, bytes))


def _journal(value: Any) -> bool:
    # DEFAULT, None/False (no journal), a path, or an open Journal (anything that records events).
    return value is DEFAULT or value is None or value is False or isinstance(value, (str, os.PathLike)) or hasattr(value, "write")


def _context(value: Any) -> bool:
    # None (off), DEFAULT, or an object with ContextPolicy's methods.
    return value is DEFAULT or value is None or all(callable(getattr(value, method, None)) for method in ("due", "prepare", "shrink", "record_usage"))


def _path(value: Any) -> bool:
    return value is None or isinstance(value, (str, os.PathLike))


def _namespace(value: Any) -> bool:
    return value is None or isinstance(value, Mapping) or callable(value)


def _as_dict(options: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict(options or {})  # a copy: the agent's options never change with the caller's dict


_PositiveInt = Annotated[int, Field(ge=1)]
_Count = Annotated[int, Field(ge=0)]
_NonNegative = Annotated[float, Field(ge=0)]

#: How the fields check values: the type itself (no "5" for 5, no True for 1), other types allowed.
_CHECKS = ConfigDict(strict=True, arbitrary_types_allowed=True)

#: A field marked this way is checked by the part built from it (the model resolver, the
#: permission gate, the sandbox, reminders), with that part's own message.
_CheckedWhereUsed = SkipValidation


class AgentSettings(BaseModel):
    """Every setting of ``Agent``: its type, default, what it accepts, and what a fork does with it.

    ``Agent(...)`` takes these fields as its arguments (the first four may be given by position:
    ``Agent(model, tools, system, max_iterations)``) and refuses a value a field does not accept.

    Example:
        >>> AgentSettings.model_fields["stall_timeout"].default
        30.0
    """

    model_config = ConfigDict(**_CHECKS, extra="forbid", use_attribute_docstrings=True)

    model: Annotated[str | Model | None, _CheckedWhereUsed] = Field(default=None, kw_only=False)
    """A model string (``"anthropic:claude-sonnet-4-6"``, ``"openai:gpt-4.1"``, ``"offline"``), a
    ``Model`` object, or None for the default (``AGENT_KERNEL_MODEL``, else Anthropic or OpenAI if
    their key is set, else the offline model)."""

    tools: Annotated[
        Iterable[Tool | Callable[..., Any] | str] | None,
        Takes("a list of tools: tools=['read_file', my_function]", _tool_list),
        Fork(lambda agent: list(agent.tools)),
    ] = Field(default=(), kw_only=False)
    """``@tool`` objects, plain functions, or names of built-in tools."""

    system: Annotated[str | None, Takes("a str, or None")] = Field(default=None, kw_only=False)
    """The system prompt."""

    max_iterations: Annotated[_PositiveInt | None, Takes("a whole number of at least 1, or None for no limit")] = Field(default=20, kw_only=False)
    """Model turns before the loop asks for a final answer without tools (None: no limit; the run
    ends when the model answers, a tool or hook stops it, or it is cancelled)."""

    permissions: Annotated[Any, _CheckedWhereUsed, Fork(None, "the fork asks the agent's permission gate")] = None
    """A mode (``"default"``, ``"accept_edits"``, ``"plan"``, ``"bypass"``) or a ``Permissions``
    object; None is ``"default"``."""

    approver: Annotated[Callable[..., Any] | None, _CheckedWhereUsed, Fork(None, "the fork asks the agent's permission gate")] = None
    """A function deciding calls the rules say to ask about."""

    approval_timeout: Annotated[float | None, _CheckedWhereUsed, Fork(None, "the fork asks the agent's permission gate")] = None
    """Seconds a call waits for a decision before it is rejected with a reason the model reads
    (None: it waits until answered or cancelled)."""

    fallback_model: Annotated[str | Model | None, _CheckedWhereUsed] = None
    """Takes over when the model is overloaded."""

    journal: Annotated[Any, Takes("a file or folder path, a Journal, or None for no journal", _journal), Fork(None, "the fork's journal argument")] = DEFAULT
    """Where events are recorded: default ``.agent_kernel/sessions/<id>.jsonl`` under
    ``working_dir``; a file path; a folder (one that exists, or a path ending in ``/``), which gets
    ``<id>.jsonl``; a ``Journal``; or None (or False) for no journal."""

    context: Annotated[
        Any,
        Takes("None to turn context management off, or a ContextManager(...)", _context),
        Fork(lambda agent: None if agent.context_manager is None else DEFAULT),
    ] = DEFAULT
    """A ``ContextManager`` (default: micro- and auto-compaction on) or None."""

    hooks: Annotated[Hooks | None, Takes("a Hooks() object, or None")] = None
    """Lifecycle hooks."""

    session_id: Annotated[Annotated[str, Field(min_length=1)] | None, Takes("a non-empty str, or None for a new id"), Fork(None, "a new session id")] = None
    """The conversation's id (default: a new one)."""

    working_dir: Annotated[str | os.PathLike[str] | None, Takes("a folder path, or None for the current folder", _path)] = None
    """Where file tools work and the journal lives (default: the current directory)."""

    max_retries: Annotated[_Count, Takes("a whole number of at least 0")] = 4
    """Retries of a retryable model failure before giving up."""

    retry_base_delay: Annotated[_NonNegative, Takes("a number of seconds, at least 0")] = 1.0
    """The first wait before a retry, in seconds (it doubles each retry, with jitter)."""

    retry_max_delay: Annotated[_NonNegative, Takes("a number of seconds, at least 0")] = 30.0
    """The longest wait between attempts, a server's ``retry-after`` included."""

    stall_timeout: Annotated[Annotated[float, Field(gt=0)] | None, Takes("a number of seconds above 0, or None to never time out")] = 30.0
    """Seconds without a stream event before ``stall_detected`` (None: never)."""

    on_stall: Annotated[Literal["retry", "abort", "fallback"], Takes("'retry', 'abort' or 'fallback'")] = "retry"
    """What a stalled stream does: ``retry``, ``abort``, or switch to the ``fallback`` model."""

    max_parallel_tools: Annotated[_PositiveInt, Takes("a whole number of at least 1")] = 10
    """Concurrency-safe tool calls running at once."""

    model_options: Annotated[
        Mapping[str, Any] | None, Takes("a dict of options for the model, or None"), AfterValidator(_as_dict),
    ] = Field(default=None, validate_default=True)
    """Passed to the model in every request (``{"max_tokens": 1024, "temperature": 0}``)."""

    tool_result_limit: Annotated[_PositiveInt | None, Takes("a whole number of characters of at least 1, or None for no limit")] = DEFAULT_TOOL_RESULT_LIMIT
    """Characters of one tool result the model sees (30,000, and at most a quarter of the model's
    context window); the whole output is kept in ``.agent_kernel/sessions/<id>/tool-output/``.
    None: no cap."""

    on_tool_error: Annotated[
        Literal["continue", "cancel"], Takes("'continue' (a failed call's siblings still run) or 'cancel' (those not started never start)"),
    ] = "continue"
    """What a failed tool call does to the calls of the same response not started yet:
    ``"continue"`` (they run) or ``"cancel"`` (they never start, each answered with why). A tool's
    own ``on_error`` takes precedence."""

    max_cost: Annotated[_NonNegative | None, Takes("a number of US dollars, at least 0, or None for no cap: max_cost=0.50")] = None
    """The most one run may spend, in US dollars (None: no cap). A run that would pass it ends
    before the model call that would, with ``termination_reason`` ``budget`` (see
    ``LoopConfig.max_cost``)."""

    name: Annotated[str | None, Takes("a str, or None")] = None
    """A display name (sub-agents, crews)."""

    subagents: Annotated[
        Mapping[str, Any] | None,
        Takes("a dict of name to Agent: subagents={'researcher': Agent(...)}"),
        Fork(None, "the task tool among the fork's tools delegates to them"),
    ] = None
    """Agents the built-in ``task`` tool may delegate to, by name: ``{"researcher": Agent(...)}``
    (or ``Subagent`` objects); see ``add_subagent``."""

    sandbox: Annotated[Any, _CheckedWhereUsed, Fork(None, "the fork gets the agent's tool_extras, its sandbox among them")] = None
    """Run ``bash`` commands inside an OS sandbox (bubblewrap): True, a
    ``agent_kernel.guard._sandbox.Sandbox`` or ``{"network": True}``; then shell calls no deny or
    ask rule names run without asking. See ``use_sandbox`` and docs/security.md."""

    mcp: Annotated[
        Iterable[Any], Takes("a list of MCP servers: mcp=[MCPServer.stdio(...)]", _server_list),
        Fork(None, "the fork's tools call the agent's servers"),
    ] = ()
    """MCP servers (``agent_kernel.mcp.MCPServer``) whose tools the agent uses, as
    ``mcp__<server>__<tool>``; they start on the first run and stop on ``close()``."""

    otel: Annotated[bool, Takes("True or False"), Fork(lambda agent: agent._otel_sink is not None)] = False
    """Also send every run to OpenTelemetry as spans (GenAI semantic conventions) through the
    global tracer provider, as events happen (``journal.otel``; needs
    ``pip install 'agent_kernel[otel]'``)."""

    keep_events: Annotated[_Count | None, Takes("a whole number of at least 0, or None to keep every event in memory"), Fork(lambda agent: agent.events.keep)] = DEFAULT_KEEP_EVENTS
    """How many events from before the current run ``agent.events`` holds in memory (10,000 by
    default, 5 to 15 MB; None: all). Older ones stay in the journal, and ``agent.events``, the
    DataFrames, replay and ``RunResult.events`` read them back from there; without a journal they
    are gone (see ``journal.event_log``)."""

    on_state_change: Annotated[Callable[[LoopState, LoopState], None] | None, Takes("a function (old_state, new_state), or None")] = None
    """Called as ``on_state_change(old, new)`` with two ``LoopState`` values each time a run moves
    between phases (calling_llm, executing_tools, ...). If it raises, the run ends with an
    ``error`` of kind ``hook``."""

    memory: Annotated[bool, Takes("True or False"), Fork(lambda agent: agent.memory.enabled)] = False
    """Use the long-term memory (``agent.memory.long_term``, under ``working_dir``): read it and
    ``AGENTS.md`` at session start, and offer the ``memory`` and ``todo_write`` tools. Off by
    default: nothing is read or written."""

    reminders: Annotated[Any, _CheckedWhereUsed, Fork(lambda agent: agent.memory.reminders or False)] = True
    """Before each prompt, tell the agent what changed (new or changed variables of ``namespace``,
    files it read that changed on disk, its todo list): True (the default), False, or
    ``memory.Reminders(...)``. See docs/memory.md."""

    namespace: Annotated[
        Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None,
        Takes("the notebook's variables: a mapping, a function returning one, or None", _namespace),
        Fork(lambda agent: agent.memory.namespace),
    ] = None
    """The notebook's variables, a mapping or a function returning one, that reminders describe by
    name, type and shape, never by value (``%%agent`` passes the IPython namespace)."""

    @classmethod
    def given(cls, caller: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> AgentSettings:
        """The settings ``caller`` (``Agent``, or a subclass) was given, once each is accepted.

        Raises:
            UserError: a setting it does not take (naming the one meant), or a value of the wrong kind.
            TypeError: more positional arguments than settings taken by position, or one given twice.
        """
        if args:
            kwargs = {**_by_position(caller, args, kwargs), **kwargs}
        return cls._validated(kwargs, caller)

    @classmethod
    def checked(cls, name: str, value: Any) -> Any:
        """``value`` as the setting ``name`` keeps it (a loop setting assigned later), once accepted.

        Raises:
            UserError: naming the setting, the value and what the setting takes.
        """
        try:
            return _field_check(name).validate_python(value)
        except pydantic.ValidationError as invalid:
            raise UserError(_not_accepted(name, value, invalid.errors()[0]["msg"])) from None

    def loop_config(self, model: Model, tools: ToolRegistry, fallback_model: Model | None) -> LoopConfig:
        """The ``LoopConfig`` of these settings, with the model, tools and fallback the agent built from them."""
        return LoopConfig(model=model, tools=tools, fallback_model=fallback_model, **{name: getattr(self, name) for name in _LOOP_SETTINGS})

    @classmethod
    def carried(cls, agent: Agent) -> dict[str, Any]:
        """The settings ``agent`` has now that a fork of it takes (see ``Fork``)."""
        return {name: read(agent) for name, read in _FORK_READS.items()}

    @classmethod
    def _validated(cls, settings: dict[str, Any], caller: str) -> AgentSettings:
        try:
            return cls.model_validate(settings)
        except pydantic.ValidationError as invalid:
            raise _refusal(invalid, settings, caller) from None


def _by_position(caller: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``args`` by the names of the settings taken by position."""
    if len(args) > len(_POSITIONAL):
        raise TypeError(f"{caller}() takes at most {len(_POSITIONAL)} settings by position ({', '.join(_POSITIONAL)}) but "
                        f"{len(args)} were given; pass the others by name: {caller}(model, tools, journal=None).")
    named = dict(zip(_POSITIONAL, args))
    twice = [name for name in named if name in kwargs]
    if twice:
        raise TypeError(f"{caller}() got {twice[0]!r} both by position and by name; give it once.")
    return named


def _refusal(invalid: pydantic.ValidationError, settings: Mapping[str, Any], caller: str) -> UserError:
    """The ``UserError`` for the first setting ``invalid`` refuses: an unknown one before a wrong value."""
    errors = invalid.errors()
    unknown = [str(error["loc"][0]) for error in errors if error["type"] == "extra_forbidden"]
    if unknown:
        return UserError(unknown_settings_message(caller, unknown, tuple(AgentSettings.model_fields)))
    name = str(errors[0]["loc"][0])
    return UserError(_not_accepted(name, settings[name], errors[0]["msg"]))


def _not_accepted(name: str, value: Any, fault: str) -> str:
    why = f"{name} takes {_TAKES[name]}" if name in _TAKES else fault  # every checked field has its words (tests)
    return f"{name}={_shown(value)} is not accepted: {why}."


@functools.cache
def _field_check(name: str) -> pydantic.TypeAdapter[Any]:
    """The check of the one field ``name``, as the model makes it (far quicker than the model's)."""
    field = AgentSettings.model_fields[name]
    annotated: Any = Annotated  # built at run time from the field, which type checkers cannot follow
    checks = (field.annotation, *field.metadata)
    return pydantic.TypeAdapter(annotated[checks], config=_CHECKS)


# Names people bring from other tools (and from the magic's own options), with what Agent calls them.
_SYNONYMS = {
    "max_turns": "max_iterations (the magic's --max-turns)",
    "max_steps": "max_iterations",
    "mode": "permissions (a mode: permissions='plan')",
    "temperature": "model_options={'temperature': ...}",
    "max_tokens": "model_options={'max_tokens': ...}",
    "system_prompt": "system",
    "instructions": "system",
}


def unknown_settings_message(caller: str, unknown: list[str], accepted: tuple[str, ...]) -> str:
    """What ``caller()`` says of settings it does not take: the one meant, and those there are."""
    first = unknown[0]
    hint = f" Did you mean {_SYNONYMS[first]}?" if first in _SYNONYMS else did_you_mean(first, accepted)
    choices = ", ".join(name for name in accepted if name not in ("self", "model", "session_id"))
    return f"{caller}() got {', '.join(map(repr, unknown))}, which Agent does not take.{hint} Agent's settings: {choices}."


def check_known_settings(cls: type, settings: Mapping[str, Any], caller: str) -> None:
    """Refuses a setting ``cls.__init__`` does not take, naming the closest one it does.

    ``Agent.resume`` and ``Agent.fork`` check before they build anything; a subclass whose
    ``__init__`` takes ``**kwargs`` judges its own.

    Raises:
        UserError: naming the unknown setting, the one meant, and the settings there are.
    """
    accepted = _parameters(cls)
    if accepted is None:
        return
    unknown = [name for name in settings if name not in accepted]
    if unknown:
        raise UserError(unknown_settings_message(caller, unknown, accepted))


@functools.lru_cache(maxsize=64)
def _parameters(cls: type) -> tuple[str, ...] | None:
    parameters = inspect.signature(cls.__init__).parameters  # type: ignore[misc]
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return None
    return tuple(parameters)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_P = ParamSpec("_P")


def typed_as_settings(settings: Callable[_P, AgentSettings]) -> Callable[[Callable[..., None]], Callable[Concatenate[Any, _P], None]]:
    """Makes ``__init__(self, *args, **kwargs)`` take ``settings``' fields, for type checkers and IDEs
    (through the fields' constructor) and at run time (``inspect.signature``, ``help``: each
    setting with its type, default and documentation)."""
    fields = typing.cast("type[AgentSettings]", settings).model_fields

    def typed(init: Callable[..., None]) -> Callable[Concatenate[Any, _P], None]:
        parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        for name, field in fields.items():
            kind = inspect.Parameter.POSITIONAL_OR_KEYWORD if name in _POSITIONAL else inspect.Parameter.KEYWORD_ONLY
            parameters.append(inspect.Parameter(name, kind, default=field.default, annotation=_plain(field.annotation)))
        init.__signature__ = inspect.Signature(parameters, return_annotation=None)  # type: ignore[attr-defined]
        described = (textwrap.fill(f"{name}: {field.description or ''}", 100, initial_indent="    ", subsequent_indent="        ") for name, field in fields.items())
        init.__doc__ = f"{inspect.cleandoc(init.__doc__ or '')}\n\nArgs:\n" + "\n".join(described)
        return init

    return typed


def _plain(annotation: Any) -> Any:
    """``annotation`` without its ``Annotated`` checks, as ``help(Agent)`` shows it."""
    if typing.get_origin(annotation) is Annotated:
        return _plain(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return functools.reduce(lambda a, b: a | b, (_plain(arg) for arg in typing.get_args(annotation)))
    return annotation


def _metadata(field: pydantic.fields.FieldInfo, kind: type[Any]) -> Any:
    return next((item for item in field.metadata if isinstance(item, kind)), None)


#: What each setting takes, in words (every setting pydantic checks has one).
_TAKES = {name: takes.words for name, field in AgentSettings.model_fields.items() if (takes := _metadata(field, Takes)) is not None}
#: The settings given by position: Agent(model, tools, system, max_iterations).
_POSITIONAL = tuple(name for name, field in AgentSettings.model_fields.items() if field.kw_only is False)
#: The settings a LoopConfig holds, bar the three the agent builds (model, tools, fallback_model).
_LOOP_SETTINGS = tuple(f.name for f in dataclasses.fields(LoopConfig) if f.name in AgentSettings.model_fields and f.name not in ("model", "tools", "fallback_model"))


def _fork_read(name: str, field: pydantic.fields.FieldInfo) -> Callable[[Agent], Any] | None:
    fork = _metadata(field, Fork)
    if fork is None:
        return lambda agent: getattr(agent, name)
    return typing.cast("Callable[[Agent], Any] | None", fork.read)


_FORK_READS = {name: read for name, field in AgentSettings.model_fields.items() if (read := _fork_read(name, field)) is not None}
