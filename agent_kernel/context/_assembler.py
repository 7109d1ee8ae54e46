"""context.assembler — ContextAssembler: fits prioritised context components into a token budget.

A component is one piece of what a model call carries (system instructions, pinned or retrieved
context, tool definitions, the history, scratch notes) with a priority and a ``truncatable`` flag.
Components are considered from the highest priority down (ties keep their given order): one that
fits is included; one that does not fit is truncated to the room left when it is truncatable, and
otherwise excluded whole, after which lower-priority components may still fill the space left.
The result records each component's decision and tokens, and is what the ``context_assembled``
event carries.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Literal

Status = Literal["included", "truncated", "excluded"]

TRUNCATION_MARK = "\n[... truncated to fit the context budget]"


class Priority(IntEnum):
    """How much a component matters; higher is kept first."""

    CRITICAL = 100
    HIGH = 90
    MEDIUM = 70
    LOW = 50
    OPTIONAL = 30


@dataclass(frozen=True, slots=True)
class Component:
    """One piece of context.

    Args:
        name: a label shown in the ``context_assembled`` event.
        content: the text; may be empty when the content lives elsewhere (the history) and
            ``tokens`` says its size.
        priority: a ``Priority`` or any int (higher is kept first).
        truncatable: whether the component may be cut down instead of dropped whole.
        tokens: its size in tokens; estimated from ``content`` when omitted.
        keep: which end of a truncated text survives: ``head`` (instructions, documents) or
            ``tail`` (notes and logs, where the newest lines matter).
    """

    name: str
    content: str = ""
    priority: int = Priority.MEDIUM
    truncatable: bool = False
    tokens: int | None = None
    keep: Literal["head", "tail"] = "head"


@dataclass(frozen=True, slots=True)
class Placed:
    """The decision for one component: its status, the tokens it takes and the text kept."""

    name: str
    priority: int
    truncatable: bool
    status: Status
    tokens: int
    requested_tokens: int
    content: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON-serialisable record used in the ``context_assembled`` event (no content)."""
        return {
            "name": self.name,
            "priority": int(self.priority),
            "truncatable": self.truncatable,
            "status": self.status,
            "tokens": self.tokens,
            "requested_tokens": self.requested_tokens,
        }


@dataclass(frozen=True, slots=True)
class Assembly:
    """The outcome of one assembly, components in the order they were given."""

    budget: int
    components: tuple[Placed, ...]

    @property
    def total_tokens(self) -> int:
        """Tokens of everything included or truncated."""
        return sum(p.tokens for p in self.components)

    def __getitem__(self, name: str) -> Placed:
        for p in self.components:
            if p.name == name:
                return p
        raise KeyError(f"no component named {name!r}; have: {', '.join(p.name for p in self.components)}")

    def text(self, separator: str = "\n\n") -> str:
        """The kept text of the included and truncated components, in their given order."""
        return separator.join(p.content for p in self.components if p.status != "excluded" and p.content)

    def to_dict(self) -> dict[str, Any]:
        """The ``context_assembled`` event data: budget, total and one record per component."""
        return {
            "budget": self.budget,
            "total_tokens": self.total_tokens,
            "components": [p.to_dict() for p in self.components],
        }


class ContextAssembler:
    """Places components into a token budget by priority.

    Args:
        count: estimates the tokens of a text (``TokenCounter.text``); the default is 4 characters
            a token.
        min_truncated_tokens: a truncatable component is excluded rather than cut to fewer tokens
            than this, since a sliver of a document helps nobody.

    Example:
        >>> a = ContextAssembler()
        >>> out = a.assemble([Component("system", "Be brief.", Priority.CRITICAL),
        ...                   Component("notes", "n" * 4000, Priority.LOW, truncatable=True)], budget=500)
        >>> [(p.name, p.status) for p in out.components]
        [('system', 'included'), ('notes', 'truncated')]
    """

    def __init__(self, count: Callable[[str], int] | None = None, *, min_truncated_tokens: int = 16) -> None:
        self.count = count or (lambda s: -(-len(s) // 4))
        self.min_truncated_tokens = min_truncated_tokens

    def assemble(self, components: Sequence[Component], budget: int) -> Assembly:
        """Decides each component's status within ``budget`` tokens."""
        sizes = [c.tokens if c.tokens is not None else self.count(c.content) for c in components]
        if sum(sizes) <= budget:
            # Everything fits (the usual case before every model call): nothing to rank.
            return Assembly(
                budget,
                tuple(Placed(c.name, c.priority, c.truncatable, "included", n, n, c.content) for c, n in zip(components, sizes)),
            )
        order = sorted(range(len(components)), key=lambda i: -int(components[i].priority))
        placed: dict[int, Placed] = {}
        room = max(0, budget)
        for i in order:
            c, size = components[i], sizes[i]
            if size <= room:
                placed[i] = Placed(c.name, c.priority, c.truncatable, "included", size, size, c.content)
                room -= size
            elif c.truncatable and room >= self.min_truncated_tokens:
                text = self._truncate(c, size, room)
                placed[i] = Placed(c.name, c.priority, c.truncatable, "truncated", room, size, text)
                room = 0
            else:
                placed[i] = Placed(c.name, c.priority, c.truncatable, "excluded", 0, size, "")
        return Assembly(budget, tuple(placed[i] for i in range(len(components))))

    def _truncate(self, c: Component, size: int, room: int) -> str:
        if not c.content:
            return ""
        # Keep the share of characters that matches the share of tokens, less the marker.
        chars = max(0, int(len(c.content) * room / size) - len(TRUNCATION_MARK))
        if c.keep == "tail":
            return TRUNCATION_MARK.strip() + "\n" + c.content[len(c.content) - chars :]
        return c.content[:chars] + TRUNCATION_MARK
