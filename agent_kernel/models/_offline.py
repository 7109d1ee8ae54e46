"""models.offline — the model used when no real one is configured: deterministic, keyless, useful.

``OfflineModel`` answers without a language model, and says so. It is a teaching model: it
follows the prompt the way an agent would, with simple rules, so that a notebook with no key
shows the loop doing real work.

* **Choosing a tool.** Each tool is scored against the prompt: its name, the words of its name
  and description, and a few verbs (``read``, ``list``, ``run``, ``compute``...). The best tool
  whose arguments the prompt can fill is called; with no match it answers in text and says which
  tools it has and how to ask for them.
* **Filling arguments.** From the prompt and the schema: URLs for a ``url``, paths (``notes/todo.md``), numbers,
  quoted strings, ```code``` and arithmetic for ``code``/``command`` arguments, enum values the
  prompt names; optional arguments keep their schema defaults. A required argument the prompt
  does not give is not invented: the answer names it instead.
* **Following a short plan.** After a ``read_file`` that finds no file it lists the folder and
  reads the file that best matches; after a listing it reads the file the prompt asks about. At
  most ``MAX_STEPS`` tool calls per prompt.
* **Working in a notebook.** With the notebook tools it reads the notebook, adds a cell that
  loads a CSV with pandas and plots a column, runs it, and describes the figure from the image's
  metadata (``models.offline_notebook``); it answers ``%agent fix`` prompts from their error.
* **Answering from results.** The last results become the answer (``notes/todo.md lists: ...``;
  a listing, what code printed, what failed).

Output streams in small chunks with a small delay, so notebooks, Binder and demos show live
streaming with no key. The same conversation always gives the same answer.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from agent_kernel.messages import Message, SummaryBlock, TextBlock, ToolResultBlock, ToolUseBlock
from agent_kernel.models import _offline_notebook as notebook
from agent_kernel.models._base import ModelRequest, StreamEvent, ToolSpec
from agent_kernel.models.scripted import Part, stream_parts, text, tool_call

SETUP_HINT = (
    "To use a real model, set AGENT_KERNEL_MODEL (for example 'anthropic:claude-sonnet-4-6' or "
    "'openai:gpt-4.1'), or set ANTHROPIC_API_KEY or OPENAI_API_KEY, or pass model=... to Agent."
)
#: Tool calls the offline model makes for one prompt before it answers from what it has.
MAX_STEPS = 3
_STAND_IN = "(offline model)"
_RESULT_PREVIEW = 300
_ITEMS_SHOWN = 20

# Verbs that point at a kind of tool, beyond the words of the tools' own names and descriptions.
_INTENTS: dict[str, tuple[str, ...]] = {
    "read": ("read", "show", "open", "contents", "content", "what", "whats", "says", "inside", "summarise", "summarize"),
    "list": ("list", "folder", "folders", "directory", "files", "ls", "which", "holds"),
    "write": ("write", "save", "create", "store", "put"),
    "edit": ("edit", "change", "replace", "fix", "rename"),
    "run": ("run", "execute", "command", "shell", "bash"),
    "python": ("compute", "calculate", "evaluate", "python", "code", "sum", "plus", "times", "add"),
    "search": ("search", "find", "grep", "where", "occurrences", "mentions"),
    "fetch": ("fetch", "web", "page", "website", "url", "link", "download", "docs"),
}
_STOP_WORDS = frozenset("a an the of in on to is it and or for my me i you your with this that be are at by from as "
                        "its it's do does please can could would".split())
_PATH = re.compile(r"(?<![\w/.-])((?:\.{1,2}/|/)?[\w.-]+(?:/[\w.-]+)*/?)(?![\w/-])")
_URL = re.compile(r"\bhttps?://[^\s<>\"'`]+", re.I)
_WEB_DATA = re.compile(r"<web-data>\n(.*?)\n</web-data>", re.S)
_QUOTED = re.compile(r"""["'“‘]([^"'”’\n]+)["'”’]""")
_BACKTICKED = re.compile(r"```(?:\w+\n)?(.+?)```|`([^`\n]+)`", re.S)
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.]*[a-zA-Z/])")
_ARITHMETIC = re.compile(r"-?\d+(?:\.\d+)?(?:\s*(?:\*\*|[-+*/%])\s*-?\d+(?:\.\d+)?)+")
_KEYED = re.compile(r"""\b(\w+)\s*[=:]?\s*["'“‘]([^"'”’\n]+)["'”’]""")
# Words before a quoted value that make it a path (write 'hello' to 'notes.md').
_PATH_CUES = frozenset({"to", "into", "in", "named", "called", "file", "path", "at", "from"})
_NUMBERED_LINE = re.compile(r"^\s*\d+\t", re.M)
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)]|\[[ xX]\])\s+(?:\[[ xX]\]\s+)?(.+)$")


class OfflineModel:
    """A deterministic stand-in model that needs no key and no network.

    Args:
        delay: seconds before each streamed chunk (0 for tests).
        chunk: characters per text delta.
        context_window: tokens it claims to accept (for context management).

    Example:
        >>> from agent_kernel import Agent  # doctest: +SKIP
        >>> Agent(model="offline", tools=["read_file"]).run_sync("What is in notes/todo.md?")  # doctest: +SKIP
    """

    provider = "offline"
    name = "offline"

    def __init__(self, *, delay: float = 0.01, chunk: int = 12, context_window: int = 200_000) -> None:
        self.delay = delay
        self.chunk = chunk
        self.context_window = context_window

    def __repr__(self) -> str:
        return "OfflineModel()"

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Streams the offline answer to ``request``."""
        # The number of messages seeds the call ids, so the same conversation gives the same ids.
        return stream_parts(self.respond(request), request, len(request.messages), self.name)

    def respond(self, request: ModelRequest) -> list[Part]:
        """The parts of the answer to ``request`` (what ``stream`` streams)."""
        prompt, since = _exchange(request.messages)
        steps = _steps(since)
        hinted = any(SETUP_HINT in m.text for m in request.messages if m.role == "assistant")
        tools = list(request.tools)
        if steps:
            following = _next_step(prompt, steps, tools) if len(steps) < MAX_STEPS else None
            if following is not None:
                spec, args, why = following
                return [self._text(f"{_STAND_IN} {why}"), self._call(spec.name, args)]
            return [self._text(notebook.notebook_answer(steps) or _answer(steps))]
        fixing = notebook.fix_answer(prompt)
        if fixing is not None:
            return [self._text(fixing)]
        first = notebook.notebook_first(prompt, tools)
        if first is not None:
            spec, args, why = first
            return [self._text(f"{_STAND_IN} {why}"), self._call(spec.name, args)]
        if tools:
            plan = _plan(prompt, tools)
            if isinstance(plan, _Call):
                intro = f"{_STAND_IN} The prompt asks for {plan.spec.name}: calling it with {_show_args(plan.args)}."
                return [self._text(intro), self._call(plan.spec.name, plan.args)]
            return [self._text(f"{plan}" + ("" if hinted else f"\n{SETUP_HINT}"))]
        echo = f' You said: "{_shorten(prompt, 80)}".' if prompt else ""
        hint = "" if hinted else f" {SETUP_HINT}"
        return [self._text(f"This is the offline model, a stand-in that answers without a language model.{echo}{hint}")]

    def _text(self, content: str) -> Part:
        return text(content, chunk=self.chunk, delay=self.delay)

    def _call(self, name: str, args: dict[str, Any]) -> Part:
        return tool_call(name, args, delay=self.delay)


# -- reading the conversation ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Step:
    """One tool call made for the current prompt, and its result (None: not answered)."""

    name: str
    args: dict[str, Any]
    result: str | None
    is_error: bool
    images: tuple[str, ...] = ()  # the alt line of each image the result showed


# What the session adds around a prompt (reminders, restored context, memory, hook context): the
# person did not write it, so the stand-in neither follows nor repeats it.
_INTERNAL = re.compile(r"<(system-reminder|restored-context|hook-context|memory|agents-md)\b[^>]*>.*?</\1>", re.S)


def _exchange(messages: Sequence[Message]) -> tuple[str, list[Message]]:
    """The last prompt (a user message with text, without what the session added) and the messages after it."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if message.role == "user" and any(isinstance(b, (TextBlock, SummaryBlock)) and b.text for b in message.content):
            return _INTERNAL.sub("", message.text).strip(), list(messages[i + 1 :])
    return "", list(messages)


def _steps(since: Sequence[Message]) -> list[_Step]:
    results = {b.tool_use_id: b for m in since for b in m.content if isinstance(b, ToolResultBlock)}
    steps = []
    for use in (b for m in since for b in m.content if isinstance(b, ToolUseBlock)):
        result = results.get(use.id)
        args = use.input if isinstance(use.input, dict) else {}
        steps.append(_Step(use.name, args, None if result is None else result.content,
                           bool(result is not None and result.is_error),
                           tuple(image.alt for image in result.images) if result is not None else ()))
    return steps


# -- choosing a tool and its arguments -------------------------------------------------------------


@dataclass(frozen=True)
class _Call:
    spec: ToolSpec
    args: dict[str, Any]


def _words(s: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9][a-z0-9'-]*", s.lower()) if w not in _STOP_WORDS]


def _score(prompt_words: set[str], mentions: _Mentions, spec: ToolSpec) -> float:
    name_parts = set(re.split(r"[_\W]+", spec.name.lower())) - {""}
    score = 10.0 if spec.name.lower() in prompt_words else 0.0
    # A file named in the prompt points at reading it; a folder, at listing it; sums, at code.
    files = [p for p in mentions.paths if not p.endswith("/") and "." in posixpath.basename(p)]
    folders = [p for p in mentions.paths if p not in files] + ([mentions.folder] if mentions.folder else [])
    if files and "read" in name_parts:
        score += 4.0
    if folders and not files and "list" in name_parts:
        score += 4.0
    properties = spec.parameters.get("properties", {}) if isinstance(spec.parameters, dict) else {}
    if (mentions.arithmetic or mentions.code) and "code" in properties:
        score += 4.0
    if mentions.urls and "url" in properties:
        score += 8.0  # a URL in the prompt points at the tool that takes one
    if mentions.arithmetic and _does(spec, mentions.arithmetic):
        score += 6.0  # "What is 2 + 3?" and a tool that adds its two numbers
    score += 3.0 * len(name_parts & prompt_words)
    described = set(_words(spec.description.split("\n")[0]))
    score += 1.0 * len(described & prompt_words)
    for intent, verbs in _INTENTS.items():
        if intent in name_parts or any(intent in part for part in name_parts):
            score += 2.0 * len(set(verbs) & prompt_words)
    return score


# The words a tool's name or description uses for what an operator does.
_OPERATIONS: dict[str, frozenset[str]] = {
    "+": frozenset({"add", "adds", "sum", "sums", "plus", "total"}),
    "-": frozenset({"subtract", "subtracts", "minus", "difference"}),
    "*": frozenset({"multiply", "multiplies", "product", "times"}),
    "/": frozenset({"divide", "divides", "quotient"}),
    "**": frozenset({"power", "pow", "exponent"}),
}


def _does(spec: ToolSpec, arithmetic: Sequence[str]) -> bool:
    """True when ``spec`` takes only numbers and its name or description names the operation."""
    properties = spec.parameters.get("properties", {}) if isinstance(spec.parameters, dict) else {}
    if not properties or any(_kind(_resolve(p, spec.parameters)) not in ("integer", "number") for p in properties.values()):
        return False
    said = set(re.split(r"[_\W]+", spec.name.lower())) | set(_words(spec.description))
    operators = {op for expression in arithmetic for op in re.findall(r"\*\*|[-+*/]", expression.lstrip("-"))}
    return any(said & _OPERATIONS.get(op, frozenset()) for op in operators)


def _plan(prompt: str, tools: Sequence[ToolSpec]) -> _Call | str:
    """The tool call the prompt asks for, or the text to answer with when there is none."""
    words = set(_words(prompt))
    mentions = _Mentions(prompt)
    ranked = sorted(((_score(words, mentions, t), i, t) for i, t in enumerate(tools)), key=lambda s: (-s[0], s[1]))
    missing: tuple[ToolSpec, list[str]] | None = None
    for score, _, spec in ranked:
        if score <= 0:
            break
        args, unfilled = fill_arguments(spec.parameters, prompt)
        if not unfilled:
            return _Call(spec, args)
        if missing is None:
            missing = (spec, unfilled)
    names = ", ".join(t.name for t in tools)
    if missing is not None:
        spec, unfilled = missing
        need = ", ".join(f"`{name}`" for name in unfilled)
        return (f"{_STAND_IN} This looks like a job for {spec.name}, but the prompt does not give its {need}. "
                f"Say it in the prompt (a path like notes/todo.md, a number, or 'a quoted value') and I will call it.")
    return (f"{_STAND_IN} I have these tools: {names}. None matches the prompt, so I answer without them. "
            f"Name a tool, or ask for what it does (\"read notes/todo.md\", \"list the files in notes\").")


def fill_arguments(schema: dict[str, Any], prompt: str) -> tuple[dict[str, Any], list[str]]:
    """Arguments for an object ``schema`` taken from ``prompt``; returns them and the unfilled names.

    Required properties are filled from what the prompt mentions: paths for path-like names,
    numbers for numeric types, ```code``` or arithmetic for ``code``/``expression``, a back-quoted
    or quoted command for ``command``, an enum value the prompt names, else a quoted string.
    Optional properties are left to their defaults unless the prompt names them with a value
    (``limit 5``). A required property with nothing to fill it from is listed as unfilled.
    """
    properties: dict[str, Any] = schema.get("properties", {}) if isinstance(schema, dict) else {}
    required = [name for name in schema.get("required", []) if name in properties] if isinstance(schema, dict) else []
    pool = _Mentions(prompt)
    args: dict[str, Any] = {}
    unfilled: list[str] = []
    for name in required:
        value = _value_for(name, _resolve(properties[name], schema), pool)
        if value is _NOTHING:
            unfilled.append(name)
        else:
            args[name] = value
    for name, prop in properties.items():
        if name in args or name in required:
            continue
        named = re.search(rf"\b{re.escape(name)}\b\s*[=:]?\s*(\S+)", prompt, re.I)
        if named is not None:
            value = _coerce(named.group(1).strip(".,;'\""), _resolve(prop, schema))
            if value is not _NOTHING:
                args[name] = value
                continue
        if name in ("path", "folder", "directory", "dir") and pool.paths:
            args[name] = pool.paths.pop(0)  # e.g. list_files: "list the files in notes"
    return args, unfilled


_NOTHING: Any = object()


class _Mentions:
    """What a prompt mentions, consumed as arguments take them."""

    def __init__(self, prompt: str) -> None:
        code = [a or b for a, b in _BACKTICKED.findall(prompt)]
        # A URL is one value (never a path, number or quote): "fetch https://docs.python.org/3/".
        self.urls = [u.rstrip(".,;:!?)]'\"") for u in _URL.findall(prompt)]
        plain = _BACKTICKED.sub(" ", _URL.sub(" ", prompt))
        self.code = [c.strip() for c in code if c.strip()]
        self.quoted = [q.strip() for q in _QUOTED.findall(plain) if q.strip()]
        # A quoted value after a word that names its role ("to 'notes.md'", "content 'hi'").
        self.keyed = [(m.group(1).lower(), m.group(2).strip()) for m in _KEYED.finditer(plain) if m.group(2).strip()]
        unquoted = _QUOTED.sub(" ", plain)
        self.paths = [p for p in _PATH.findall(unquoted) if _looks_like_path(p)]
        self.arithmetic = [m.group().strip() for m in _ARITHMETIC.finditer(unquoted)]
        self.numbers = [float(n) if "." in n else int(n) for n in _NUMBER.findall(unquoted)]
        self.words = set(_words(prompt))
        folder = re.search(r"\b(?:in|under|inside|of)\s+(?:the\s+)?(?:folder\s+)?([\w.-]+/?)(?=[\s?.!,]|$)", unquoted)
        if folder and not self.paths and folder.group(1).lower() not in _STOP_WORDS | {"folder", "directory"}:
            self.folder: str | None = folder.group(1).rstrip("/")
        else:
            self.folder = None


def _looks_like_path(token: str) -> bool:
    if "/" in token.strip("/"):
        return True
    # "todo.md" or "a.py", but not "e.g" or "3.5".
    return bool(re.fullmatch(r"(?:[\w-]{2,}\.[A-Za-z]\w{0,5}|[\w-]\.[A-Za-z]\w{1,5})", token)) \
        and not re.fullmatch(r"\d+\.\d+", token)


def _resolve(prop: Any, root: dict[str, Any]) -> dict[str, Any]:
    if isinstance(prop, dict) and isinstance(prop.get("$ref"), str) and prop["$ref"].startswith("#/"):
        target: Any = root
        for part in prop["$ref"][2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return target if isinstance(target, dict) else {}
    if isinstance(prop, dict):
        for key in ("anyOf", "oneOf"):
            options = [o for o in prop.get(key, []) if isinstance(o, dict) and o.get("type") != "null"]
            if options:
                return {**options[0], **{k: v for k, v in prop.items() if k not in (key,)}}
        return prop
    return {}


def _kind(prop: dict[str, Any]) -> str:
    kind = prop.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind is None and "enum" in prop:
        return "enum"
    return str(kind or "string")


def _keyed(pool: _Mentions, cues: frozenset[str]) -> Any:
    """The first quoted value a word of ``cues`` introduces, taken from the pool; else nothing."""
    for cue, value in pool.keyed:
        if cue in cues and value in pool.quoted:
            pool.quoted.remove(value)
            pool.keyed.remove((cue, value))
            return value
    return _NOTHING


def _value_for(name: str, prop: dict[str, Any], pool: _Mentions) -> Any:
    lowered = name.lower()
    if _kind(prop) == "string" and "enum" not in prop:
        named = _keyed(pool, frozenset({lowered}))  # the prompt names the argument: content 'x'
        if named is not _NOTHING:
            return named
    if "enum" in prop:
        named = [v for v in prop["enum"] if str(v).lower() in pool.words]
        return named[0] if named else prop.get("default", prop["enum"][0])
    kind = _kind(prop)
    if kind == "string" and lowered in ("url", "uri", "link", "href"):
        return pool.urls.pop(0) if pool.urls else prop.get("default", _NOTHING)
    if kind in ("integer", "number"):
        numbers = [n for n in pool.numbers if kind == "number" or isinstance(n, int)]
        if numbers:
            pool.numbers.remove(numbers[0])
            return float(numbers[0]) if kind == "number" else numbers[0]
        return prop.get("default", _NOTHING)
    if kind == "boolean":
        return prop.get("default", lowered in pool.words)
    if kind == "array":
        items = pool.quoted or pool.paths
        if items:
            taken, items[:] = list(items), []
            return taken
        return prop.get("default", _NOTHING)
    if kind == "object":
        return prop.get("default", example_arguments(prop))
    if any(w in lowered for w in ("path", "file", "folder", "dir")):
        if pool.paths:
            return pool.paths.pop(0)
        cued = _keyed(pool, _PATH_CUES)
        if cued is not _NOTHING:
            return cued
        if pool.folder is not None:
            return pool.folder
    elif lowered in ("code", "expression", "source", "expr"):
        if pool.code:
            return pool.code.pop(0)
        if pool.arithmetic:
            return pool.arithmetic.pop(0)
    elif lowered in ("command", "cmd", "script"):
        if pool.code:
            return pool.code.pop(0)
    elif lowered in ("pattern", "query", "regex", "glob"):
        if pool.quoted:
            return pool.quoted.pop(0)
        if pool.code:
            return pool.code.pop(0)
    if pool.quoted:
        return pool.quoted.pop(0)
    return prop.get("default", _NOTHING)


def _coerce(raw: str, prop: dict[str, Any]) -> Any:
    kind = _kind(prop)
    try:
        if kind == "integer":
            return int(raw)
        if kind == "number":
            return float(raw)
    except ValueError:
        return _NOTHING
    if kind == "boolean":
        return {"true": True, "false": False, "yes": True, "no": False}.get(raw.lower(), _NOTHING)
    if kind == "string" and "enum" not in prop:
        return raw
    if "enum" in prop:
        return next((v for v in prop["enum"] if str(v).lower() == raw.lower()), _NOTHING)
    return _NOTHING


def _show_args(args: dict[str, Any]) -> str:
    if not args:
        return "no arguments"
    return ", ".join(f"{k}={_shorten(repr(v), 60)}" for k, v in args.items())


# -- following a short plan -----------------------------------------------------------------------


def _tool(tools: Sequence[ToolSpec], *names: str) -> ToolSpec | None:
    return next((t for name in names for t in tools if t.name == name), None)


def _next_step(prompt: str, steps: Sequence[_Step], tools: Sequence[ToolSpec]) -> tuple[ToolSpec, dict[str, Any], str] | None:
    """The next call of a short plan (read → list → read; the notebook's), or None to answer now."""
    last = steps[-1]
    if last.result is None:
        return None
    if last.name in ("read_notebook", "edit_notebook"):
        return notebook.notebook_next(prompt, steps, tools)
    done = {(s.name, repr(sorted(s.args.items()))) for s in steps}
    reader, lister = _tool(tools, "read_file"), _tool(tools, "list_files")
    if last.name == "read_file" and last.is_error and lister is not None:
        folder = posixpath.dirname(str(last.args.get("path", "")).rstrip("/")) or "."
        args: dict[str, Any] = {"path": folder}
        if "recursive" in lister.parameters.get("properties", {}):
            args["recursive"] = True  # the file may be in a sub-folder
        if ("list_files", repr(sorted(args.items()))) not in done:
            return lister, args, f"{last.args.get('path')!s} was not found, so I list {folder} to look for it."
    if last.name in ("list_files", "glob") and not last.is_error and reader is not None:
        wanted = set(_words(prompt))
        folder = str(last.args.get("path", ".")).rstrip("/")
        entries = [e.strip() for e in last.result.splitlines() if e.strip() and not e.strip().endswith("/")]
        if last.name == "list_files" and folder not in ("", "."):
            entries = [e if e.startswith(folder + "/") else f"{folder}/{e}" for e in entries]
        ranked = sorted(entries, key=lambda e: -len(set(_words(e.replace("/", " ").replace(".", " "))) & wanted))
        if ranked and (set(_words(ranked[0].replace("/", " ").replace(".", " "))) & wanted or len(ranked) == 1):
            args = {"path": ranked[0]}
            if ("read_file", repr(sorted(args.items()))) not in done and set(_INTENTS["read"]) & wanted:
                return reader, args, f"{ranked[0]} matches the prompt, so I read it."
    return None


# -- answering from results -----------------------------------------------------------------------


def _answer(steps: Sequence[_Step]) -> str:
    """The answer built from the tool results of this prompt, the latest first in importance."""
    answered = [s for s in steps if s.result is not None]
    if not answered:
        pending = ", ".join(s.name for s in steps)
        return f"{_STAND_IN} {pending} did not answer, so I have nothing to report."
    last = answered[-1]
    lines = [f"{_STAND_IN} {_describe(last)}"]
    earlier = [s for s in answered[:-1]]
    if earlier:
        lines.append("Along the way: " + "; ".join(_brief(s) for s in earlier) + ".")
    return "\n".join(lines)


def _brief(step: _Step) -> str:
    what = _target(step)
    status = "failed" if step.is_error else "worked"
    return f"{step.name}{f' {what}' if what else ''} {status}"


def _target(step: _Step) -> str:
    for key in ("path", "pattern", "command", "code", "url"):
        if key in step.args:
            return _shorten(str(step.args[key]), 40)
    return ""


def _describe(step: _Step) -> str:
    result = step.result or ""
    if step.is_error:
        return f"{step.name} failed: {_shorten(result, _RESULT_PREVIEW)}"
    if step.name == "read_file":
        body = _NUMBERED_LINE.sub("", result)
        lines = [line for line in body.splitlines() if line.strip()]
        path = step.args.get("path", "the file")
        items = [m.group(1).strip() for m in (_ITEM.match(line) for line in lines) if m]
        if items:
            shown = "\n".join(f"- {item}" for item in items[:_ITEMS_SHOWN])
            more = f"\n(and {len(items) - _ITEMS_SHOWN} more)" if len(items) > _ITEMS_SHOWN else ""
            return f"{path} lists:\n{shown}{more}"
        if not lines:
            return f"{path} is empty."
        return f"{path} says:\n" + "\n".join(lines[:_ITEMS_SHOWN])
    if step.name in ("list_files", "glob"):
        entries = [e.strip() for e in result.splitlines() if e.strip()]
        where = step.args.get("path", step.args.get("pattern", "."))
        if not entries:
            return f"{where} holds nothing."
        return f"{where} holds {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}: {', '.join(entries[:_ITEMS_SHOWN])}."
    if step.name in ("python", "bash"):
        return f"{step.name} gave:\n{_shorten_lines(result, _RESULT_PREVIEW)}" if result.strip() else f"{step.name} printed nothing."
    if step.name in ("write_file", "edit_file"):
        return f"{step.name}: {_shorten(result, _RESULT_PREVIEW)}"
    page = _WEB_DATA.search(result)
    if step.name == "web_fetch" and page is not None:  # the page, not the note that wraps it
        return f"{step.args.get('url', 'the page')} says:\n{_shorten_lines(page.group(1), _RESULT_PREVIEW)}"
    return f"{step.name} returned: {_shorten(result, _RESULT_PREVIEW)}"


def _shorten(s: str, limit: int) -> str:
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _shorten_lines(s: str, limit: int) -> str:
    s = s.strip()
    return s if len(s) <= limit else s[: limit - 1] + "…"


# -- schema examples ------------------------------------------------------------------------------


def example_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments that satisfy an object ``schema``: its required properties, each with an example.

    Defaults, ``const``, ``enum`` and ``examples`` are used when the schema gives them; otherwise
    a plain value of the type (``"example"``, 1, 1.0, True, ``[]`` of one item, nested objects).
    Local ``$ref``s into ``$defs`` are followed.
    """
    value = _example(schema, schema, depth=0)
    return value if isinstance(value, dict) else {}


def _example(schema: Any, root: dict[str, Any], depth: int) -> Any:
    if not isinstance(schema, dict) or depth > 8:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return _example(target, root, depth + 1)
    for key in ("default", "const"):
        if key in schema:
            return schema[key]
    if schema.get("enum"):
        return schema["enum"][0]
    if isinstance(schema.get("examples"), list) and schema["examples"]:
        return schema["examples"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = [o for o in schema.get(key, []) if isinstance(o, dict) and o.get("type") != "null"]
        if options:
            return _example(options[0], root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties", {})
        return {name: _example(properties.get(name, {}), root, depth + 1) for name in schema.get("required", [])}
    if kind == "array":
        return [_example(schema.get("items", {}), root, depth + 1)]
    return {"string": "example", "integer": 1, "number": 1.0, "boolean": True}.get(kind or "", None)
