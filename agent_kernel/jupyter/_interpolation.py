"""jupyter.interpolation — fills ``{name}`` in an ``%%agent`` prompt from the notebook's namespace.

``{name}``, ``{name.attribute}`` and ``{name[3]}`` / ``{name['key']}`` (so ``{In[4]}`` and
``{Out[2]}`` work) are replaced by ``str`` of the value. Nothing is evaluated: only names,
attributes and literal subscripts are looked up, so a prompt cannot run code. ``{{`` and ``}}``
stand for literal braces. Braces around anything else (``{"a": 1}``, ``{}``) are left alone, and a
name that is not defined is left as written with an ``InterpolationWarning``.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Mapping
from typing import Any


class InterpolationWarning(UserWarning):
    """A ``{name}`` in a prompt is not defined; it was sent as written."""


_ACCESS = r"(?:\.[A-Za-z_]\w*|\[\s*-?\d+\s*\]|\[\s*'[^'\\\]]*'\s*\]|\[\s*\"[^\"\\\]]*\"\s*\])"
_TOKEN = re.compile(r"\{\{|\}\}|\{\s*(?P<path>[A-Za-z_]\w*" + _ACCESS + r"*)\s*\}")
_STEP = re.compile(r"\.(?P<attr>[A-Za-z_]\w*)|\[\s*(?P<key>-?\d+|'[^']*'|\"[^\"]*\")\s*\]")


class _Missing(Exception):
    pass


def _lookup(path: str, namespace: Mapping[str, Any]) -> Any:
    head = re.match(r"[A-Za-z_]\w*", path)
    assert head is not None  # the token pattern guarantees a leading name
    if head.group() not in namespace:
        raise _Missing
    value = namespace[head.group()]
    for step in _STEP.finditer(path, head.end()):
        try:
            if step.group("attr") is not None:
                value = getattr(value, step.group("attr"))
            else:
                value = value[ast.literal_eval(step.group("key"))]
        except (AttributeError, LookupError, TypeError):
            raise _Missing from None
    return value


def interpolate(text: str, namespace: Mapping[str, Any]) -> str:
    """``text`` with each ``{name...}`` replaced from ``namespace`` (see the module docstring).

    Example:
        >>> interpolate("Rows: {n}; literal {{n}}; JSON {\\"a\\": 1}", {"n": 3})
        'Rows: 3; literal {n}; JSON {"a": 1}'
    """
    missing: list[str] = []

    def replace(match: re.Match[str]) -> str:
        token = match.group()
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        try:
            return str(_lookup(match.group("path"), namespace))
        except _Missing:
            if token not in missing:
                missing.append(token)
            return token

    result = _TOKEN.sub(replace, text)
    if missing:
        names = ", ".join(missing)
        # Attributed to the prompt itself, not to a line of this package: Python would print that
        # line of source under the warning, which says nothing to the person who wrote the prompt.
        warnings.warn_explicit(
            f"{names} in the prompt {'is' if len(missing) == 1 else 'are'} not defined in the notebook, "
            "so the prompt says it as written. Define it in a cell above, write {{ and }} for literal "
            "braces, or use %%agent --no-interpolate.",
            InterpolationWarning, "<%%agent prompt>", 1, module="agent_kernel.prompt",
        )
    return result
