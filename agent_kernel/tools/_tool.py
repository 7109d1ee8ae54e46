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
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, overload

import pydantic
import pydantic_core

from agent_kernel.errors import StopRun
from agent_kernel.models._base import ToolSpec

__all__ = ["Tool", "ToolContext", "ToolResult", "tool"]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call produced, as the model will see it."""

    content: str
    is_error: bool = False
    stop: bool = False
    final_message: str | None = None


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


_GOOGLE_ARG = re.compile(r"^\s{2,}(\*{0,2}\w+)(?:\s*\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_ARG = re.compile(r"^\s*:param\s+(?:\w+\s+)?(\w+)\s*:\s*(.*)$")
_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Returns|Raises|Yields|Example|Examples|Note|Notes)\s*:\s*$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Splits a docstring into the description and ``{parameter: description}``."""
    if not doc:
        return "", {}
    doc = inspect.cleandoc(doc)
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    last: str | None = None
    for line in doc.splitlines():
        m = _SECTION.match(line)
        if m:
            section, last = m.group(1), None
            continue
        sphinx = _SPHINX_ARG.match(line)
        if sphinx:
            last = sphinx.group(1)
            params[last] = sphinx.group(2).strip()
            continue
        if section in ("Args", "Arguments", "Parameters"):
            g = _GOOGLE_ARG.match("  " + line) if not line.startswith(" ") else _GOOGLE_ARG.match(line)
            if g and not line.startswith("    " * 2):
                last = g.group(1).lstrip("*")
                params[last] = g.group(2).strip()
            elif last and line.strip():
                params[last] += " " + line.strip()
            continue
        if section is None and not line.strip().startswith(":"):
            description.append(line)
    return "\n".join(description).strip(), params


def _stringify(value: Any) -> str:
    if isinstance(value, str):
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
    """

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
    ) -> None:
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
        try:
            return model.model_dump(mode="json")
        except pydantic_core.PydanticSerializationError:  # a value JSON cannot hold: judged by its text
            return {k: _stringify(getattr(model, k)) for k in type(model).model_fields}

    def key(self, arguments: dict[str, Any]) -> str:
        """The text permission patterns match against, e.g. ``git status`` for ``bash``."""
        if self.permission_key is not None:
            return self.permission_key(arguments)
        if len(arguments) == 1:
            return _stringify(next(iter(arguments.values())))
        return json.dumps(arguments, sort_keys=True, default=str)

    async def invoke(self, arguments: dict[str, Any], context: ToolContext) -> str:
        """Runs the tool on validated ``arguments`` and returns its result as text.

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
        return _stringify(result)


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
        )

    return wrap(function) if function is not None else wrap
