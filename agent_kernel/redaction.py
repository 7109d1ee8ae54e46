"""redaction — keeps credentials out of tool results and events: ``Redactor``.

Values of environment variables whose names look like credentials (``*_API_KEY``, ``*_TOKEN``,
``*SECRET*``, ``*PASSWORD*``, ...) are replaced by ``[REDACTED:NAME]`` wherever they appear, so a
tool that prints the environment leaks nothing to the model, the journal or the view. Values
shorter than 8 characters are ignored: redacting ``"1"`` or ``"true"`` everywhere would mangle
ordinary text and protect nothing.

Example:
    >>> r = Redactor({"OPENAI_API_KEY": "sk-abcdef123456"})
    >>> r.redact("key=sk-abcdef123456")
    'key=[REDACTED:OPENAI_API_KEY]'
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["MIN_SECRET_LENGTH", "Redactor", "looks_like_secret_name"]

MIN_SECRET_LENGTH = 8

# Matched against the upper-cased variable name.
_SECRET_NAME = re.compile(
    r"(_API_KEY$|API_KEY|_TOKEN$|_TOKEN_|^TOKEN$|SECRET|PASSWORD|PASSWD|_ACCESS_KEY|_PRIVATE_KEY|_CREDENTIALS?$)"
)


def looks_like_secret_name(name: str) -> bool:
    """True when an environment variable's name suggests it holds a credential."""
    return _SECRET_NAME.search(name.upper()) is not None


class Redactor:
    """Replaces known secret values with ``[REDACTED:NAME]``.

    Args:
        secrets: variable name -> secret value. Values shorter than ``MIN_SECRET_LENGTH`` are
            ignored.
    """

    __slots__ = ("_names", "_pattern")

    def __init__(self, secrets: Mapping[str, str]) -> None:
        names: dict[str, str] = {}
        for name, value in secrets.items():
            if not value or len(value) < MIN_SECRET_LENGTH:
                continue
            names.setdefault(value, name)
            # Secrets inside JSON text appear escaped (a quote or backslash in a password).
            escaped = json.dumps(value)[1:-1]
            names.setdefault(escaped, name)
        self._names = names
        # Longest first, so a secret that contains another is replaced whole.
        alternatives = sorted(names, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, alternatives))) if alternatives else None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Redactor:
        """A Redactor for the credentials in ``environ`` (default: ``os.environ``)."""
        env = os.environ if environ is None else environ
        return cls({name: value for name, value in env.items() if looks_like_secret_name(name)})

    @property
    def active(self) -> bool:
        """False when there is nothing to redact, so callers can skip the work."""
        return self._pattern is not None

    @property
    def names(self) -> list[str]:
        """The names of the variables whose values are redacted, sorted."""
        return sorted(set(self._names.values()))

    def redact(self, text: str) -> str:
        """``text`` with every secret value replaced by ``[REDACTED:NAME]``."""
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(lambda m: f"[REDACTED:{self._names[m.group(0)]}]", text)

    def redact_data(self, obj: Any) -> Any:
        """Redacts every string inside dicts, lists and tuples (keys included); other values pass."""
        if self._pattern is None:
            return obj
        if isinstance(obj, str):
            return self.redact(obj)
        if isinstance(obj, dict):
            return {self.redact_data(k): self.redact_data(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.redact_data(v) for v in obj]
        if isinstance(obj, tuple):
            return tuple(self.redact_data(v) for v in obj)
        return obj

    def __repr__(self) -> str:
        return f"Redactor({', '.join(self.names) or 'nothing'})"
