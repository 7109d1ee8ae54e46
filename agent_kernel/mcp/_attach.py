"""mcp.attach — MCP resources and prompts as the text of a user message.

A prompt that mentions ``@server:uri`` (a server of the agent, then one of its resource URIs)
gets that resource's text appended, between ``<mcp-resource server=… uri=…>`` and
``</mcp-resource>`` lines, capped like a tool result (the whole text goes to a file in the
session's folder). The mention stays where it was written, so the model can tell which block it
refers to. A server's prompt (``prompts/get``) becomes message text the same way: each message's
text in order, an assistant's message marked as such.

Errors name what exists: an unknown server lists the agent's servers, an unknown URI the
server's resources and URI templates, an unknown prompt the server's prompts and their arguments.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agent_kernel.errors import UserError
from agent_kernel.mcp._content import block_text

#: ``@server:uri`` at the start of the text or after a space or an opening bracket; the URI runs to
#: the next space, without a trailing punctuation mark (a sentence may end right after it).
_MENTION = re.compile(r"(?:(?<=^)|(?<=[\s(\[<]))@([A-Za-z0-9_-]{1,32}):(\S+)")
_TRAILING = ".,;:!?)]>'\""
#: Resources and prompts quoted in an error before "and N more".
_LISTED = 20


@dataclass(frozen=True)
class Mention:
    """One ``@server:uri`` in a prompt."""

    server: str
    uri: str


def parse_ref(ref: str, what: str = "resource") -> tuple[str, str]:
    """``server:rest`` split in two (``ev:demo://x`` → ``("ev", "demo://x")``).

    Raises:
        UserError: there is no ``:`` or either side is empty.
    """
    server, sep, rest = ref.lstrip("@").partition(":")
    if not sep or not server or not rest:
        example = "ev:demo://resource/static/document/architecture.md" if what == "resource" else "ev:simple-prompt"
        raise UserError(f"{ref!r} does not name an MCP {what}: write SERVER:{'URI' if what == 'resource' else 'NAME'}, e.g. {example}.")
    return server, rest


def find_mentions(prompt: str, servers: Iterable[str]) -> list[Mention]:
    """The ``@server:uri`` mentions of ``prompt`` whose server is one of ``servers``, once each, in order."""
    known = set(servers)
    found: list[Mention] = []
    for match in _MENTION.finditer(prompt):
        server, uri = match.group(1), match.group(2).rstrip(_TRAILING)
        # Only a server of this agent makes a mention: "@home:page" in prose stays prose.
        if server in known and uri and Mention(server, uri) not in found:
            found.append(Mention(server, uri))
    return found


def _template_regex(template: str) -> re.Pattern[str]:
    """A URI template (``demo://text/{id}``) as a regex matching the URIs it expands to."""
    parts = re.split(r"\{[^}]*\}", template)
    return re.compile("^" + "[^/]+".join(re.escape(p) for p in parts) + "$")


def resource_known(uri: str, resources: Sequence[Any], templates: Sequence[Any]) -> bool:
    """Whether ``uri`` is a listed resource or matches a listed URI template."""
    if any(str(r.uri) == uri for r in resources):
        return True
    return any(_template_regex(str(t.uri_template)).match(uri) for t in templates)


def listing(items: Sequence[str]) -> str:
    """``a, b, c`` (at most ``_LISTED``, then how many more)."""
    shown = ", ".join(items[:_LISTED])
    return shown + (f" and {len(items) - _LISTED} more" if len(items) > _LISTED else "")


def resource_block(server: str, uri: str, result: Any) -> tuple[str, str | None]:
    """A ``ReadResourceResult`` as text for the model, and its MIME type (of the first part)."""
    parts: list[str] = []
    mime: str | None = None
    for contents in getattr(result, "contents", None) or ():
        mime = mime or getattr(contents, "mime_type", None)
        text = getattr(contents, "text", None)
        if text is not None:
            parts.append(str(text))
        else:  # a binary resource: described, never inlined as base64
            parts.append(block_text(_Embedded(contents)))
    return "\n".join(parts), mime


class _Embedded:
    """Lets ``block_text`` describe one resource's contents as it describes an embedded resource."""

    type = "resource"

    def __init__(self, resource: Any) -> None:
        self.resource = resource


def prompt_usage(prompt: Any) -> str:
    """``name key=… [key=…]``: how to call a server prompt (optional arguments in brackets)."""
    words = [str(prompt.name)]
    for arg in getattr(prompt, "arguments", None) or ():
        words.append(f"{arg.name}=…" if arg.required else f"[{arg.name}=…]")
    return " ".join(words)


def check_prompt_arguments(server: str, prompt: Any, arguments: dict[str, str]) -> None:
    """Raises ``UserError`` when a required argument is missing or an argument is unknown."""
    declared = list(getattr(prompt, "arguments", None) or ())
    names = [str(a.name) for a in declared]
    unknown = [k for k in arguments if k not in names]
    missing = [str(a.name) for a in declared if a.required and str(a.name) not in arguments]
    if unknown or missing:
        problem = f"has no argument {', '.join(map(repr, unknown))}" if unknown else f"needs {', '.join(f'{m}=…' for m in missing)}"
        raise UserError(f"MCP prompt {server}:{prompt.name} {problem}. Use it as: {server}:{prompt_usage(prompt)}.")


def prompt_text(result: Any) -> str:
    """A ``GetPromptResult`` as one user message's text: each message in order.

    A prompt may script an exchange; an assistant's message is marked ``[assistant]`` so the model
    reads it as what was said to it, not as its own words.
    """
    parts: list[str] = []
    for message in getattr(result, "messages", None) or ():
        text = block_text(message.content)
        parts.append(f"[assistant] {text}" if getattr(message, "role", "user") == "assistant" else text)
    return "\n\n".join(p for p in parts if p)


def unknown_server(server: str, servers: Sequence[str], what: str) -> UserError:
    """The error for a mention or option naming a server the agent does not have."""
    known = f"Its MCP servers: {', '.join(servers)}." if servers else "It has no MCP servers (%agent mcp add or Agent(mcp=[...]) adds one)."
    return UserError(f"{what}: this agent has no MCP server {server!r}. {known}")


@dataclass(frozen=True)
class PromptRequest:
    """``%%agent --prompt SERVER:NAME KEY=VALUE ...``, parsed."""

    server: str
    name: str
    arguments: dict[str, str]


def cell_options(resources: Sequence[str] | None, prompt: Sequence[str] | None, servers: Sequence[str]) -> tuple[str, PromptRequest | None]:
    """Checks ``%%agent --resource`` and ``--prompt`` against the session's servers.

    Returns the mentions to add to the prompt (``--resource ev:uri`` is the same as writing
    ``@ev:uri``), and the server prompt to use, if any.

    Raises:
        UserError: a reference is malformed, names a server the session does not have, or an
            argument is not ``KEY=VALUE``.
    """
    mentions: list[str] = []
    for ref in resources or ():
        server, uri = parse_ref(ref)
        if server not in servers:
            raise unknown_server(server, servers, f"--resource {ref}")
        mentions.append(f"@{server}:{uri}")
    request: PromptRequest | None = None
    if prompt:
        server, name = parse_ref(prompt[0], "prompt")
        if server not in servers:
            raise unknown_server(server, servers, f"--prompt {prompt[0]}")
        arguments: dict[str, str] = {}
        for word in prompt[1:]:
            key, sep, value = word.partition("=")
            if not sep or not key:
                raise UserError(f"--prompt {prompt[0]}: {word!r} is not KEY=VALUE; give each argument as key=value (quote a value with spaces: city=\"New York\").")
            arguments[key] = value
        request = PromptRequest(server, name, arguments)
    return " ".join(mentions), request
