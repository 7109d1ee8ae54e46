"""messages — provider-neutral conversation messages and their content blocks.

Adapters translate these to and from each provider's wire format; the loop, the journal and the
context manager only ever see these types. Every type round-trips through ``to_dict`` /
``message_from_dict`` so the journal can rebuild a conversation exactly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, Union, cast

from typing_extensions import TypedDict

from agent_kernel._util.text import encodable, encodable_data

__all__ = [
    "BlockDict",
    "IMAGE_CHARS",
    "ImageDict",
    "MessageDict",
    "Block",
    "ImageBlock",
    "Message",
    "Role",
    "SummaryBlock",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "add_user_text",
    "block_from_dict",
    "message_from_dict",
    "with_user_text",
]


class ImageDict(TypedDict):
    """An ``ImageBlock``, as ``ImageBlock.to_dict`` writes it."""

    media_type: str  # image/png, image/jpeg, image/gif or image/webp
    data: str  # the image, base64
    width: int | None  # pixels, when known
    height: int | None  # pixels, when known
    alt: str  # what a model that takes no images reads instead (and what the image shows, when known)


class BlockDict(TypedDict, total=False):
    """A content block, as ``messages.block_to_dict`` writes it: ``type`` and that block's fields."""

    type: Literal["text", "thinking", "tool_use", "tool_result", "summary"]  # which kind of block
    text: str  # text, thinking and summary blocks
    signature: str | None  # thinking: the provider's signature, sent back unchanged
    id: str  # tool_use: the call id
    name: str  # tool_use: the tool
    input: dict[str, Any]  # tool_use: the arguments
    tool_use_id: str  # tool_result: the call it answers
    content: str  # tool_result: what the model reads
    is_error: bool  # tool_result
    images: list[ImageDict]  # tool_result: pictures the result shows (a plot), when it has any
    messages_replaced: int  # summary: how many messages it stands for


class MessageDict(TypedDict):
    """A ``Message``, as ``Message.to_dict`` writes it."""

    role: Literal["user", "assistant"]  # who said it
    content: list[BlockDict]  # its blocks, in order

Role = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class TextBlock:
    """Plain text."""

    text: str
    type: Literal["text"] = "text"

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", encodable(self.text))


@dataclass(frozen=True, slots=True)
class ThinkingBlock:
    """Model reasoning; ``signature`` is kept so the provider can verify it on the next request."""

    text: str
    signature: str | None = None
    type: Literal["thinking"] = "thinking"

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", encodable(self.text))


@dataclass(frozen=True, slots=True)
class ToolUseBlock:
    """A tool call the model made. ``input`` is the parsed arguments (``{"_raw": ...}`` if not JSON)."""

    id: str
    name: str
    input: dict[str, Any]
    type: Literal["tool_use"] = "tool_use"

    def __post_init__(self) -> None:
        # A model's JSON may escape a lone surrogate; arguments are sent back with the history.
        object.__setattr__(self, "input", encodable_data(self.input))


@dataclass(frozen=True, slots=True)
class ImageBlock:
    """A picture a tool result shows (a plot, an image output of a notebook cell).

    Each adapter sends it the way its API takes images; a model that takes none reads ``alt``.

    Attributes:
        media_type: ``image/png``, ``image/jpeg``, ``image/gif`` or ``image/webp``.
        data: the image bytes, base64-encoded (already capped and scaled for models).
        width: pixels, when known.
        height: pixels, when known.
        alt: a one-line description: its size and, for a figure, its title and axes.
    """

    media_type: str
    data: str
    width: int | None = None
    height: int | None = None
    alt: str = ""

    def to_dict(self) -> ImageDict:
        """A JSON-serialisable dict."""
        return {"media_type": self.media_type, "data": self.data, "width": self.width, "height": self.height, "alt": self.alt}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ImageBlock:
        """Rebuilds an image from ``to_dict`` output."""
        return cls(str(data["media_type"]), str(data["data"]), data.get("width"), data.get("height"), str(data.get("alt", "")))

    @property
    def placeholder(self) -> str:
        """What a model that takes no images reads in its place."""
        size = f" {self.width}×{self.height}" if self.width and self.height else ""
        return f"[image {self.media_type}{size}{': ' + self.alt if self.alt else ''}]"


#: Characters an image counts as when the conversation's size is estimated (about 1,600 tokens).
IMAGE_CHARS = 6_400


@dataclass(frozen=True, slots=True)
class ToolResultBlock:
    """The result of one tool call, sent back to the model in a user message.

    ``images`` are pictures the result shows (a plot), sent after its text.
    """

    tool_use_id: str
    content: str
    is_error: bool = False
    images: tuple[ImageBlock, ...] = ()
    type: Literal["tool_result"] = "tool_result"

    def __post_init__(self) -> None:
        object.__setattr__(self, "content", encodable(self.content))


@dataclass(frozen=True, slots=True)
class SummaryBlock:
    """A compaction summary standing in for the messages it replaced."""

    text: str
    messages_replaced: int = 0
    type: Literal["summary"] = "summary"

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", encodable(self.text))


Block = Union[TextBlock, ThinkingBlock, ToolUseBlock, ToolResultBlock, SummaryBlock]

_BLOCK_TYPES: dict[str, type] = {
    "text": TextBlock,
    "thinking": ThinkingBlock,
    "tool_use": ToolUseBlock,
    "tool_result": ToolResultBlock,
    "summary": SummaryBlock,
}


def block_to_dict(block: Block) -> BlockDict:
    """Returns a JSON-serialisable dict for a block (with its ``type``).

    A tool result's ``images`` key is written only when it has images, so text-only results
    keep the shape they always had.
    """
    out = {name: getattr(block, name) for name in block.__slots__}
    if isinstance(block, ToolResultBlock):
        if block.images:
            out["images"] = [image.to_dict() for image in block.images]
        else:
            del out["images"]
    return cast("BlockDict", out)


def block_from_dict(data: dict[str, Any]) -> Block:
    """Rebuilds a block from ``block_to_dict`` output."""
    cls = _BLOCK_TYPES[data["type"]]
    fields = {k: v for k, v in data.items() if k != "type"}
    if "images" in fields:
        fields["images"] = tuple(ImageBlock.from_dict(i) for i in fields["images"] or ())
    return cls(**fields)


@dataclass(frozen=True, slots=True)
class Message:
    """One conversation message: a role and a tuple of blocks."""

    role: Role
    content: tuple[Block, ...] = field(default_factory=tuple)

    @classmethod
    def user(cls, text: str) -> Message:
        """A user message holding one text block."""
        return cls("user", (TextBlock(text),))

    @property
    def text(self) -> str:
        """The concatenated text blocks (summaries included)."""
        return "".join(b.text for b in self.content if isinstance(b, (TextBlock, SummaryBlock)))

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        """The tool_use blocks, in order."""
        return [b for b in self.content if isinstance(b, ToolUseBlock)]

    @property
    def tool_results(self) -> list[ToolResultBlock]:
        """The tool_result blocks, in order."""
        return [b for b in self.content if isinstance(b, ToolResultBlock)]

    def to_dict(self) -> MessageDict:
        """A JSON-serialisable dict."""
        return {"role": self.role, "content": [block_to_dict(b) for b in self.content]}

    def char_count(self) -> int:
        """Characters of content, used by token estimation."""
        n = 0
        for b in self.content:
            if isinstance(b, ToolUseBlock):
                n += len(b.name) + len(json.dumps(b.input, default=str))
            elif isinstance(b, ToolResultBlock):
                n += len(b.content) + IMAGE_CHARS * len(b.images)
            else:
                n += len(b.text)
        return n


def message_from_dict(data: dict[str, Any]) -> Message:
    """Rebuilds a message from ``Message.to_dict`` output."""
    return Message(data["role"], tuple(block_from_dict(b) for b in data["content"]))


def add_user_text(messages: list[Message], text: str) -> None:
    """Adds ``text`` as a user message, joined to a user message that ends ``messages`` (a run
    that stopped after its tool results, a steered message): roles must alternate."""
    if messages and messages[-1].role == "user":
        last = messages.pop()
        messages.append(Message("user", last.content + (TextBlock(text),)))
    else:
        messages.append(Message.user(text))


def with_user_text(messages: tuple[Message, ...], text: str) -> tuple[Message, ...]:
    """``messages`` with ``text`` added as ``add_user_text`` adds it, leaving them unchanged (an
    instruction for one request only)."""
    out = list(messages)
    add_user_text(out, text)
    return tuple(out)
