"""agent_checks — ``Agent``'s settings checked when they are given, not when a run trips on them.

A setting of the wrong kind (``max_iterations="5"``, ``stall_timeout=-5``, ``tools="read_file"``)
would otherwise be taken and fail later, deep inside a run, with a message about something the
person never wrote. ``check_setting`` is the one place that knows what each setting accepts: the
constructor checks every argument through it, and so does assigning a loop setting later
(``agent.stall_timeout = 10``, see ``agent_parts.LoopSetting``).
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agent_kernel.errors import UserError, did_you_mean

__all__ = ["check_known_settings", "check_setting", "check_settings"]


def _whole(value: Any, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _number(value: Any, least: float, *, above: bool = False) -> bool:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    return value > least if above else value >= least


def _optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or check(value)


def _tools(value: Any) -> bool:
    return value is None or (isinstance(value, Iterable) and not isinstance(value, (str, bytes)))


def _journal(value: Any) -> bool:
    # DEFAULT, None/False (no journal), a path, or an open Journal (anything that records events).
    return value is None or value is False or isinstance(value, (str, os.PathLike)) or hasattr(value, "write")


def _context(value: Any) -> bool:
    # None (off), DEFAULT, or an object with ContextPolicy's methods.
    return value is None or all(callable(getattr(value, method, None)) for method in ("due", "prepare", "shrink", "record_usage"))


def _hooks(value: Any) -> bool:
    from agent_kernel.runtime._hooks import Hooks

    return value is None or isinstance(value, Hooks)


# setting -> (accepts, what it accepts in words)
_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "tools": (_tools, "a list of tools: tools=['read_file', my_function]"),
    "system": (_optional(lambda v: isinstance(v, str)), "a str, or None"),
    "max_iterations": (_optional(lambda v: _whole(v, 1)), "a whole number of at least 1, or None for no limit"),
    "max_retries": (lambda v: _whole(v, 0), "a whole number of at least 0"),
    "retry_base_delay": (lambda v: _number(v, 0), "a number of seconds, at least 0"),
    "retry_max_delay": (lambda v: _number(v, 0), "a number of seconds, at least 0"),
    "stall_timeout": (_optional(lambda v: _number(v, 0, above=True)), "a number of seconds above 0, or None to never time out"),
    "on_stall": (lambda v: v in ("retry", "abort", "fallback"), "'retry', 'abort' or 'fallback'"),
    "on_tool_error": (lambda v: v in ("continue", "cancel"), "'continue' (a failed call's siblings still run) or 'cancel' (those not started never start)"),
    "max_parallel_tools": (lambda v: _whole(v, 1), "a whole number of at least 1"),
    "model_options": (_optional(lambda v: isinstance(v, Mapping)), "a dict of options for the model, or None"),
    "tool_result_limit": (_optional(lambda v: _whole(v, 1)), "a whole number of characters of at least 1, or None for no limit"),
    "max_cost": (_optional(lambda v: _number(v, 0)), "a number of US dollars, at least 0, or None for no cap: max_cost=0.50"),
    "name": (_optional(lambda v: isinstance(v, str)), "a str, or None"),
    "session_id": (_optional(lambda v: isinstance(v, str) and bool(v)), "a non-empty str, or None for a new id"),
    "working_dir": (_optional(lambda v: isinstance(v, (str, os.PathLike))), "a folder path, or None for the current folder"),
    "journal": (_journal, "a file or folder path, a Journal, or None for no journal"),
    "context": (_context, "None to turn context management off, or a ContextManager(...)"),
    "hooks": (_hooks, "a Hooks() object, or None"),
    "on_state_change": (_optional(callable), "a function (old_state, new_state), or None"),
    "subagents": (_optional(lambda v: isinstance(v, Mapping)), "a dict of name to Agent: subagents={'researcher': Agent(...)}"),
    "keep_events": (_optional(lambda v: _whole(v, 0)), "a whole number of at least 0, or None to keep every event in memory"),
}


def check_setting(name: str, value: Any) -> None:
    """Refuses ``value`` for the ``Agent`` setting ``name`` if it is not what the setting takes.

    Raises:
        UserError: naming the setting, what was given and what it takes.
    """
    check = _CHECKS.get(name)
    if check is not None and not check[0](value):
        raise UserError(f"{name}={_shown(value)} is not accepted: {name} takes {check[1]}.")


def check_settings(settings: Mapping[str, Any], default: Any) -> None:
    """``check_setting`` for each of ``settings`` (the arguments ``Agent`` was given) that is not
    ``default`` (the marker of an argument left out)."""
    for name, value in settings.items():
        if value is not default:
            check_setting(name, value)


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


def check_known_settings(cls: type, settings: Mapping[str, Any], caller: str) -> None:
    """Refuses a setting ``cls.__init__`` does not take, naming the closest one it does.

    A subclass whose ``__init__`` takes ``**kwargs`` judges its own.

    Raises:
        UserError: naming the unknown setting, the one meant, and the settings there are.
    """
    accepted = _parameters(cls)
    if accepted is None:
        return
    unknown = [name for name in settings if name not in accepted]
    if unknown:
        first = unknown[0]
        hint = f" Did you mean {_SYNONYMS[first]}?" if first in _SYNONYMS else did_you_mean(first, accepted)
        choices = ", ".join(name for name in accepted if name not in ("self", "model", "session_id"))
        raise UserError(f"{caller}() got {', '.join(map(repr, unknown))}, which Agent does not take.{hint} Agent's settings: {choices}.")


@functools.lru_cache(maxsize=64)
def _parameters(cls: type) -> tuple[str, ...] | None:
    parameters = inspect.signature(cls.__init__).parameters  # type: ignore[misc]
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return None
    return tuple(parameters)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
