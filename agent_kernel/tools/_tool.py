"""tools.tool — ``@tool``: a typed Python function as a tool, with its JSON schema and flags.

The schema comes from the type hints (through pydantic), the description from the docstring,
including per-parameter docs from a Google-style ``Args:`` section or Sphinx ``:param x:`` lines.
A parameter annotated ``ToolContext`` receives the call's context (progress, stop) and is not
part of the schema.
"""

from __future__ import annotations

import functools
import inspect
import json
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, overload

import docstring_parser
import pydantic
import pydantic_core

from agent_kernel.errors import StopRun
from agent_kernel.messages import ImageBlock
from agent_kernel.models._base import ToolSpec

#: What a failed call may do to its siblings not started yet (``Tool.on_error``, ``on_tool_error``).
ON_ERROR = ("continue", "cancel")


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call produced, as the model will see it.

    A tool may return one instead of a value: ``ToolResult("saved", stop=True,
    final_message="All done.")`` ends the run after this call (``tool_stop``) with
    ``final_message`` as its answer; calls of the same response not started yet never start.
    It also sends pictures (``images``) besides its text.
    """

    content: str
    is_error: bool = False
    stop: bool = False
    final_message: str | None = None
    images: tuple[ImageBlock, ...] = ()


@dataclass
class ToolContext:
    """Handed to a tool that declares a ``ToolContext`` parameter.

    Attributes:
        call_id: the tool_use id.
        tool_name: the tool's name.
        working_dir: the run's working directory.
        extras: run-level services (e.g. ``namespace`` for the python tool).
        run: the run making the call (the loop's ``ExecutionContext``: a sub-agent joins it), or None.
            Typed loosely because tools sit below the runtime that defines it.
        approved_file: for a call a person or policy approved, the file its card showed
            (``guard._paths.FileIdentity``); a file tool opens that same file or refuses.
    """

    call_id: str
    tool_name: str
    working_dir: Any = None
    extras: dict[str, Any] = field(default_factory=dict)
    _report: Callable[[str, float | None], None] | None = None
    run: Any = field(default=None, repr=False)
    approved_file: Any = None

    def progress(self, message: str, fraction: float | None = None) -> None:
        """Reports progress; shown live as a ``tool_progress`` event."""
        if self._report is not None:
            self._report(message, fraction)

    def stop(self, final_message: str | None = None) -> typing.NoReturn:
        """Ends the whole run after this call (TOOL_STOP), with an optional final message."""
        raise StopRun(f"tool {self.tool_name!r} stopped the run", final_message)


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Splits a docstring (Google, NumPy or Sphinx style) into the description and ``{parameter: description}``."""
    if not doc:
        return "", {}
    parsed = docstring_parser.parse(doc)
    description = "\n\n".join(part for part in (parsed.short_description, parsed.long_description) if part)
    # A parameter's description may wrap over lines; the model reads it as one sentence.
    params = {p.arg_name.lstrip("*"): " ".join((p.description or "").split()) for p in parsed.params}
    return description.strip(), params


def _stringify(value: Any) -> str | ToolResult:
    if isinstance(value, (str, ToolResult)):
        return value
    if value is None:
        return ""
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump_json()
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):
        return repr(value)


class Tool:
    """A callable the model may use. Build one with ``@tool``.

    Attributes:
        name: the name the model calls it by.
        description: what it does (from the docstring).
        parameters: the JSON schema of its arguments.
        read_only: it changes nothing (permission modes let it run without asking).
        concurrency_safe: it may run in parallel with other concurrency-safe calls.
        timeout: seconds before the call is abandoned with an error result (None: no limit).
        category: a permission grouping (``"edit"`` for file edits, ``"execute"``, ...).
        on_error: what a failed call does to the calls of the same response not started yet:
            ``"continue"`` (they run) or ``"cancel"`` (they never start, each answered with
            why). None follows the agent's ``on_tool_error``.
    """

    on_error: str | None = None

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        read_only: bool = False,
        concurrency_safe: bool | None = None,
        timeout: float | None = None,
        category: str | None = None,
        permission_key: Callable[[dict[str, Any]], str] | None = None,
        on_error: str | None = None,
    ) -> None:
        if on_error not in (None, *ON_ERROR):
            raise ValueError(f"on_error must be one of {', '.join(map(repr, ON_ERROR))} (or None to follow the agent), got {on_error!r}")
        self.on_error = on_error
        self.function = function
        self.name = name or function.__name__
        doc_description, param_docs = parse_docstring(function.__doc__)
        self.description = description or doc_description or self.name
        self.read_only = read_only
        # A read-only tool is safe to run beside others unless it says otherwise.
        self.concurrency_safe = read_only if concurrency_safe is None else concurrency_safe
        self.timeout = timeout
        self.category = category
        self.permission_key = permission_key
        self.is_async = inspect.iscoroutinefunction(function)
        self._context_param: str | None = None
        self._args_model = self._build_model(param_docs)
        self.parameters = self._args_model.model_json_schema()
        self.parameters.pop("title", None)

    def __repr__(self) -> str:
        flags = ", ".join(f for f, on in (("read_only", self.read_only), ("concurrency_safe", self.concurrency_safe)) if on)
        return f"Tool({self.name!r}{', ' + flags if flags else ''})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Calls the underlying function directly (tools stay ordinary functions)."""
        return self.function(*args, **kwargs)

    def _build_model(self, param_docs: dict[str, str]) -> type[pydantic.BaseModel]:
        sig = inspect.signature(self.function)
        try:
            hints = typing.get_type_hints(self.function, include_extras=True)
        except Exception:  # unresolvable forward references: fall back to raw annotations
            hints = {}
        fields: dict[str, Any] = {}
        for pname, param in sig.parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            annotation = hints.get(pname, param.annotation)
            if annotation is ToolContext or annotation == "ToolContext":
                self._context_param = pname
                continue
            if annotation is inspect.Parameter.empty:
                annotation = Any
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[pname] = (annotation, pydantic.Field(default, description=param_docs.get(pname)))
        # An argument the function does not take is refused, never dropped: the call that is
        # judged must be the call that runs (docs/security.md).
        return pydantic.create_model(f"{self.name}_args", __config__=pydantic.ConfigDict(extra="forbid"), **fields)

    @property
    def spec(self) -> ToolSpec:
        """The tool as offered to a model."""
        return ToolSpec(self.name, self.description, self.parameters)

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Validates and converts ``arguments``; raises ``pydantic.ValidationError``."""
        model = self._args_model.model_validate(arguments)
        return {k: getattr(model, k) for k in type(model).model_fields}

    def judged(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The validated ``arguments`` as JSON values, defaults filled: what rules and approvals see.

        The permission gate judges this, not the model's raw arguments, so a rule about the value
        a default gives (``deploy(prod)`` when ``target`` defaults to ``"prod"``) holds whether or
        not the model spelled it; raises ``pydantic.ValidationError`` like ``validate``.
        """
        model = self._args_model.model_validate(arguments)
        # Each value the function will get, as JSON: not ``model_dump``, which leaves out a field
        # marked ``exclude=True`` and applies a field's own serializer (``PlainSerializer``), so
        # the rules would judge something other than what runs.
        judged: dict[str, Any] = {}
        for name in type(model).model_fields:
            value = getattr(model, name)
            try:
                judged[name] = pydantic_core.to_jsonable_python(value)
            except pydantic_core.PydanticSerializationError:  # a value JSON cannot hold: judged by its text
                judged[name] = _stringify(value)
        return judged

    def key(self, arguments: dict[str, Any]) -> str:
        """The text permission patterns match against, e.g. ``git status`` for ``bash``."""
        if self.permission_key is not None:
            return self.permission_key(arguments)
        if len(arguments) == 1:
            return str(_stringify(next(iter(arguments.values()))))
        return json.dumps(arguments, sort_keys=True, default=str)

    def describe_call(self, arguments: dict[str, Any], working_dir: Any = None) -> str | None:
        """What the call would change, for its approval card (None: nothing beyond the arguments).

        ``edit_notebook`` shows the cell's new source (a diff for a replace); any other tool says
        nothing. Called before the call runs, so it must not change anything.
        """
        return None

    async def invoke(self, arguments: dict[str, Any], context: ToolContext) -> str | ToolResult:
        """Runs the tool on validated ``arguments`` and returns its result as text (or the
        ``ToolResult`` the function returned, which can stop the run or carry images).

        Sync functions run in a thread of their own so a slow tool never blocks the event loop,
        and a cancelled run does not wait for one that blocks (see ``tools.threads``).
        """
        kwargs = dict(arguments)
        if self._context_param:
            kwargs[self._context_param] = context
        if self.is_async:
            result = await self.function(**kwargs)
        else:
            from agent_kernel.tools._threads import run_in_thread

            result = await run_in_thread(functools.partial(self.function, **kwargs), name=self.name)
        return result if isinstance(result, ToolResult) else _stringify(result)


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    concurrency_safe: bool | None = None,
    timeout: float | None = None,
    on_error: str | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    concurrency_safe: bool | None = None,
    timeout: float | None = None,
    on_error: str | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turns a typed function (sync or async) into a ``Tool``.

    Example:
        >>> @tool(read_only=True)
        ... def add(a: int, b: int) -> int:
        ...     '''Adds two integers.'''
        ...     return a + b
        >>> add.spec.parameters["required"]
        ['a', 'b']
    """

    def wrap(fn: Callable[..., Any]) -> Tool:
        return Tool(
            fn,
            name=name,
            description=description,
            read_only=read_only,
            concurrency_safe=concurrency_safe,
            timeout=timeout,
            on_error=on_error,
        )

    return wrap(function) if function is not None else wrap
