"""signing — journal headers signed with a per-user key, so a resumed journal is one this install wrote.

A journal's header names the session; the journal lists the tools and the system prompt a resumed
agent gets. A file dropped into ``.agent_kernel/sessions/`` by anything that can write the
workspace would otherwise be resumed as if it were the person's own session. So the journal writer
signs each header it writes (HMAC-SHA256 over the header's canonical JSON) with a key kept outside
the workspace, in ``$XDG_CONFIG_HOME/agent_kernel/journal.key`` (``~/.config/...`` by default),
made with mode 0600 on first use; the sandbox hides that folder from commands. ``Agent.resume``
checks the signature and refuses a header that is unsigned or does not match unless the person
says they trust it (``Agent.resume(path, trust=True)``, ``%agent resume --trust``).

The signature covers the header only: it proves where the file came from, not that nothing was
appended to it since (the sandbox keeps ``.agent_kernel`` read-only for commands).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent_kernel.errors import UserError

#: The header field that holds the signature.
SIGNATURE_FIELD = "signature"
_SCHEME = "hmac-sha256:"


def key_path() -> Path:
    """Where this user's journal key is kept (``$XDG_CONFIG_HOME/agent_kernel/journal.key``)."""
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config).expanduser() / "agent_kernel" / "journal.key"


def _key(create: bool) -> bytes | None:
    """The key, made (0600, in a 0700 folder) when ``create`` and there is none yet."""
    path = key_path()
    if create and not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # another process made it first: use theirs
        else:
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32) + "\n")
    try:
        info = path.stat()
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UserError(f"The journal key {path} cannot be read ({exc.strerror or exc}). Fix its permissions "
                        "(chmod 600), or set XDG_CONFIG_HOME to a folder of yours.") from None
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise UserError(f"The journal key {path} can be read by other users (mode {stat.filemode(info.st_mode)}), so "
                        f"anyone could sign a journal with it. Run: chmod 600 {path}")
    if len(text) < 32:
        raise UserError(f"The journal key {path} is too short to be one this install made. Delete it (a new one is "
                        "made on the next journal; journals signed with the old one then need trust=True to resume).")
    return text.encode("ascii", "replace")


def _digest(key: bytes, header: Mapping[str, Any]) -> str:
    unsigned = {name: value for name, value in header.items() if name != SIGNATURE_FIELD}
    canonical = json.dumps(unsigned, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return _SCHEME + hmac.new(key, canonical.encode("ascii"), hashlib.sha256).hexdigest()


def sign_header(header: Mapping[str, Any]) -> str:
    """The signature to store in ``header[SIGNATURE_FIELD]`` (the key is made on first use).

    Raises:
        UserError: the key cannot be read or made, or other users can read it.
    """
    key = _key(create=True)
    if key is None:  # pragma: no cover  # made just above
        raise UserError(f"The journal key {key_path()} could not be made.")
    return _digest(key, header)


def header_problem(header: Mapping[str, Any] | None) -> str | None:
    """Why ``header`` is not one this install signed (None: it is)."""
    if header is None:
        return "it has no header"
    signature = header.get(SIGNATURE_FIELD)
    if not isinstance(signature, str) or not signature:
        return "its header is not signed (it was written by another install, an older version, or by hand)"
    key = _key(create=False)
    if key is None:
        return f"there is no journal key here ({key_path()}) to check its signature against"
    if not hmac.compare_digest(signature, _digest(key, header)):
        return f"its header's signature does not match this user's journal key ({key_path()}): it was changed, or written elsewhere"
    return None
