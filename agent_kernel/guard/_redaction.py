"""redaction — keeps credentials out of tool results, events and the journal: ``Redactor``.

What counts as a secret, in the environment:

* the value of a variable whose name looks like a credential (``*_API_KEY``, ``*_KEY``,
  ``*_TOKEN``, ``*SECRET*``, ``*PASSWORD*``, ``*_PASS``, ...), whatever the value looks like;
* any value that looks like a credential, whatever its variable's name: a known provider shape
  (``sk-``, ``sk-ant-``, ``ghp_``, ``github_pat_``, ``xoxb-``, ``AKIA``, ``AIza``, ``hf_``,
  ``glpat-``, ``npm_``, ``pypi-``, Stripe keys, JWTs, PEM private keys) or a long random-looking
  token (see ``looks_like_token``), also when it is one word of a longer value;
* the password of a URL (``postgres://user:PASS@host/db``): the password, and the whole URL.

Each secret is replaced by ``[REDACTED:NAME]`` (the variable's name) wherever it appears, in its
plain form and in the forms a tool may print it in: JSON-escaped, percent-encoded and
percent-decoded (a URL password written ``p%40ss`` and printed ``p@ss`` by a tool that decoded
it), hex, and base64 and base64url at each of the three byte alignments (so a key inside a base64
``user:key`` blob is caught too). Each form is also found with line breaks inside it, as
``base64 -w 76`` or ``xxd -p`` wrap long output: the whole wrapped run is replaced.

``Redactor.learn`` adds secrets that are not in the environment (the values an MCP server is
given in ``env=`` and its ``headers=``).

``Redactor.from_environ()`` watches ``os.environ``: each call compares the environment with the one
it last read (a dict comparison, well under a microsecond) and re-reads it when it changed, so a
key set after the ``Agent`` was built is covered. A secret once seen stays redacted after its
variable is removed.

A secret split across streamed deltas (text, thinking, a tool call's arguments): ``SecretStream`` holds back the end of a delta that
could be the start of a secret and releases it with the next delta (or when the block ends), so
no event, and no journal record, holds a piece of one.

What it cannot promise: a secret shorter than ``MIN_SECRET_LENGTH`` (except inside a URL), one not
in the environment (a key in a file the model reads), or one transformed in a way not listed above
(reversed, split by the model into parts in different events, encrypted) is not recognised.

Example:
    >>> r = Redactor({"OPENAI_API_KEY": "sk-abcdef123456"})
    >>> r.redact("key=sk-abcdef123456")
    'key=[REDACTED:OPENAI_API_KEY]'
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
import re
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, unquote

MIN_SECRET_LENGTH = 8
# A URL password is specific in its place (between ':' and '@'), so shorter ones are caught there.
_MIN_URL_PASSWORD = 3

# Matched against the upper-cased variable name.
_SECRET_NAME = re.compile(
    r"(_API_KEY$|API_KEY|_KEY$|_TOKEN$|_TOKEN_|^TOKEN$|SECRET|PASSWORD|PASSWD|_PASS$|_ACCESS_KEY|_PRIVATE_KEY|_CREDENTIALS?$)"
)

# Known credential shapes. Each is anchored on a distinctive prefix, so an ordinary word never matches.
_KNOWN = re.compile(
    r"""(?x)
    (?:sk-ant-(?:api|admin)\d\d-[A-Za-z0-9_-]{20,}      # Anthropic
     | sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,}  # OpenAI and compatibles
     | gh[pousr]_[A-Za-z0-9]{30,}                       # GitHub tokens
     | github_pat_[A-Za-z0-9_]{40,}                     # GitHub fine-grained tokens
     | xox[abposr]-[A-Za-z0-9-]{10,}                    # Slack
     | xapp-\d-[A-Za-z0-9-]{10,}                        # Slack app tokens
     | (?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}    # AWS access key ids
     | AIza[0-9A-Za-z_-]{35}                            # Google API keys
     | hf_[A-Za-z0-9]{30,}                              # Hugging Face
     | glpat-[A-Za-z0-9_-]{20,}                         # GitLab
     | npm_[A-Za-z0-9]{36}                              # npm
     | pypi-[A-Za-z0-9_-]{50,}                          # PyPI
     | (?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,}         # Stripe
     | SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}       # SendGrid
     | eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}  # JWT
    )"""
)
_PEM = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")
# userinfo of a URL: scheme://user:password@
_URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://([^\s:/@]*):([^\s/@]+)@")
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9+/=_.~-]+")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_HEX = re.compile(r"[0-9a-fA-F]+")
_CHUNK = re.compile(r"[-_.]")
_RUNS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+|[0-9]+|[^A-Za-z0-9]")
# Words of a longer value that are judged one by one (``--token=ghp_... --verbose``).
_WORD_SPLIT = re.compile(r"[\s,;:='\"]+")
_MAX_WORDS = 64
# Longest secret prefix kept in the stream's lookup set; longer ones are checked form by form.
_PREFIX_CAP = 64


def looks_like_secret_name(name: str) -> bool:
    """True when an environment variable's name suggests it holds a credential."""
    return _SECRET_NAME.search(name.upper()) is not None


def _entropy(text: str) -> float:
    """Shannon entropy of ``text`` in bits per character."""
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


def _random_chunk(chunk: str) -> bool:
    """A piece that looks generated: mixed letter cases and digits, or a long hex run."""
    if len(chunk) >= 16 and _HEX.fullmatch(chunk) and any(c.isdigit() for c in chunk) and any(c.isalpha() for c in chunk):
        return True
    if len(chunk) < 8:
        return False
    classes = any(c.islower() for c in chunk) + any(c.isupper() for c in chunk) + any(c.isdigit() for c in chunk)
    if not (classes >= 2 and any(c.isdigit() for c in chunk) or classes == 3):
        return False
    # Generated text changes case and digits every character or two; CamelCase words
    # ("MyApplicationName2024") change every word.
    return len(chunk) < 3.5 * len(_RUNS.findall(chunk))


def looks_like_token(value: str) -> bool:
    """True for a long, random-looking token: an API key with no known prefix, a hex secret, a UUID.

    The value must be at least 20 characters of token characters (letters, digits, ``+/=_.~-``),
    not start like a path, have an entropy of at least 3 bits per character, and most of it must be
    made of generated-looking pieces (mixed case with digits, or hex): ``python3.11-slim-bookworm``,
    ``my_long_setting_name_2`` and paths are not tokens; ``9f86d081884c7d659a2feaa0c55ad015`` and
    ``aZ3kP9qLm2XvB7nR4tW8yC1d`` are. A UUID counts: in the environment one is as often a key as an id.
    """
    if len(value) < 20 or len(value) > 4096 or value[0] in "/.~" or not _TOKEN_CHARS.fullmatch(value):
        return False
    if _UUID.fullmatch(value):
        return True
    if "/" in value and value.count("/") * 12 > len(value):  # a path, not base64 (1 '/' in 64)
        return False
    if _entropy(value) < 3.0:
        return False
    random_chars = sum(len(c) for c in _CHUNK.split(value) if _random_chunk(c))
    return random_chars >= 0.6 * len(value)


def looks_like_secret(value: str) -> bool:
    """True when ``value`` is shaped like a credential: a known provider key, a PEM key or a token."""
    return bool(_KNOWN.fullmatch(value) or _PEM.search(value) or looks_like_token(value))


def _secrets_of_value(name: str, value: str) -> Iterable[str]:
    """The secrets inside one environment value (see the module docstring)."""
    if not value:
        return
    if looks_like_secret_name(name) or looks_like_secret(value):
        yield value
        if _PEM.search(value):  # each base64 line of a key, as a tool may print it re-wrapped
            yield from (line.strip() for line in value.splitlines() if len(line.strip()) >= 16 and "-----" not in line)
        return
    for m in _URL_PASSWORD.finditer(value):
        user, password = m.group(1), m.group(2)
        yield value
        yield password
        yield f"{user}:{password}@"
        decoded = unquote(password)
        if decoded != password:  # what a tool that decodes the URL prints
            yield decoded
            yield f"{unquote(user)}:{decoded}@"
    if len(value) >= 20:
        for word in _WORD_SPLIT.split(value, _MAX_WORDS)[:_MAX_WORDS]:
            if word != value and (_KNOWN.fullmatch(word) or looks_like_token(word)):
                yield word
        yield from (m.group(0) for m in _KNOWN.finditer(value))


def secrets_in_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """``{secret value: variable name}`` for every secret in ``environ`` (see the module docstring)."""
    found: dict[str, str] = {}
    for name, value in environ.items():
        for secret in _secrets_of_value(name, value):
            short = len(secret) < MIN_SECRET_LENGTH
            if short and not (secret.endswith("@") and len(secret) > _MIN_URL_PASSWORD + 1):
                continue
            found.setdefault(secret, name)
    return found


def _b64_forms(data: bytes, urlsafe: bool) -> list[str]:
    """Base64 text that appears whenever ``data`` is base64-encoded inside anything, at each alignment."""
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    forms = [encode(data).decode("ascii")]
    for k in range(3):
        text = encode(b"\0" * k + data).decode("ascii").rstrip("=")
        start = -(-8 * k // 6)  # the first character made only of the secret's bits
        end = 8 * (k + len(data)) // 6  # past the last such character
        if end - start >= MIN_SECRET_LENGTH:
            forms.append(text[start:end])
    return forms


def _plain_forms(secret: str) -> list[str]:
    """``secret`` as written, JSON-escaped, percent-encoded and percent-decoded: what a model could stream as text."""
    forms = [secret, json.dumps(secret)[1:-1], quote(secret, safe="")]
    decoded = unquote(secret)
    if decoded != secret and len(decoded) >= MIN_SECRET_LENGTH:
        forms.append(decoded)
    return forms


def _forms(secret: str) -> list[str]:
    """Every spelling of ``secret`` a tool may print: plain, escaped and encoded."""
    forms = _plain_forms(secret)
    if len(secret) >= MIN_SECRET_LENGTH:
        raw = secret.encode("utf-8", errors="surrogatepass")
        forms += _b64_forms(raw, urlsafe=False) + _b64_forms(raw, urlsafe=True)
        hexed = binascii.hexlify(raw).decode("ascii")
        forms += [hexed, hexed.upper()]
    return forms


class _Table:
    """One compiled state of a redactor: every form of every secret, and its label."""

    __slots__ = ("heads", "labels", "long_forms", "longest", "pattern", "prefixes", "shortest", "starts")

    def __init__(self, secrets: Mapping[str, str]) -> None:
        labels: dict[str, str] = {}
        for secret, name in secrets.items():
            for form in _forms(secret):
                if form:
                    labels.setdefault(form, name)
        self.labels = labels
        # Longest first, so a secret that contains another is replaced whole.
        alternatives = sorted(labels, key=len, reverse=True)
        self.pattern = re.compile("|".join(map(re.escape, alternatives))) if alternatives else None
        # For the stream, the plain forms only (a model has no encoded secret to stream: tool
        # results reach it redacted), so ordinary text is rarely held back: their proper prefixes
        # up to _PREFIX_CAP characters (a PEM key has thousands; all its prefixes would take
        # megabytes), the longer forms with their first _PREFIX_CAP characters, and the
        # characters they start with. Encoded forms are still redacted inside each delta.
        plain = {form for secret in secrets for form in _plain_forms(secret) if form}
        self.prefixes = frozenset(form[:i] for form in plain for i in range(1, min(len(form), _PREFIX_CAP + 1)))
        self.long_forms = tuple(form for form in plain if len(form) > _PREFIX_CAP)
        self.heads = frozenset(form[:_PREFIX_CAP] for form in self.long_forms)
        self.starts = frozenset(form[0] for form in plain)
        self.longest = max(map(len, plain), default=0)  # how far back a held tail can start
        self.shortest = min(map(len, labels), default=0)


_EMPTY = _Table({})


class Redactor:
    """Replaces secret values with ``[REDACTED:NAME]``.

    Args:
        secrets: variable name -> secret value, each redacted whatever it looks like. Values
            shorter than ``MIN_SECRET_LENGTH`` are ignored.

    Use ``Redactor.from_environ()`` for the redactor an agent uses: it finds secrets by name and
    by value and follows later changes to ``os.environ``.
    """

    __slots__ = ("_known", "_lock", "_seen_env", "_table", "_watch")

    def __init__(self, secrets: Mapping[str, str] | None = None) -> None:
        self._known: dict[str, str] = {}
        for name, value in (secrets or {}).items():
            if value and len(value) >= MIN_SECRET_LENGTH:
                self._known.setdefault(value, name)
        self._table = _Table(self._known) if self._known else _EMPTY
        self._watch: Any = None
        self._seen_env: dict[Any, Any] | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Redactor:
        """A Redactor for the secrets in ``environ``, by name and by value.

        With no argument it watches ``os.environ`` and re-reads it whenever it changes, so keys set
        later are redacted too; with a mapping it is fixed to what that mapping holds.
        """
        redactor = cls()
        if environ is None:
            # os.environ keeps its variables in ``_data``; comparing that dict is the cheap check.
            redactor._watch = getattr(os.environ, "_data", os.environ)
            redactor._refresh()
        else:
            redactor._add(secrets_in_environ(environ))
        return redactor

    def learn(self, secrets: Mapping[str, str]) -> None:
        """Adds secrets that are not in the environment: ``{name: value}``, each value redacted as
        ``[REDACTED:NAME]`` from now on (values shorter than ``MIN_SECRET_LENGTH`` are ignored)."""
        found: dict[str, str] = {}
        for name, value in secrets.items():
            if isinstance(value, str) and len(value) >= MIN_SECRET_LENGTH:
                found.setdefault(value, name)
            for secret in _secrets_of_value(name, value) if isinstance(value, str) else ():
                if len(secret) >= MIN_SECRET_LENGTH:
                    found.setdefault(secret, name)
        with self._lock:
            self._add(found)

    def _add(self, found: Mapping[str, str]) -> None:
        new = {secret: name for secret, name in found.items() if secret not in self._known}
        if new:
            self._known.update(new)
            self._table = _Table(self._known)

    def _refresh(self) -> _Table:
        """The current table, re-reading the environment first if it changed since the last look."""
        watch = self._watch
        if watch is None or watch == self._seen_env:
            return self._table
        with self._lock:
            snapshot = dict(watch)
            if snapshot != self._seen_env:
                self._add(secrets_in_environ(dict(os.environ)))
                self._seen_env = snapshot
        return self._table

    @property
    def active(self) -> bool:
        """False when there is nothing to redact now or later, so callers can skip the work."""
        return self._watch is not None or self._table.pattern is not None

    @property
    def names(self) -> list[str]:
        """The names of the variables whose values are redacted, sorted."""
        return sorted(set(self._refresh().labels.values()))

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced by ``[REDACTED:NAME]``."""
        table = self._refresh() if self._watch is not None else self._table
        return _redact(table, text)

    def redact_data(self, obj: Any) -> Any:
        """Redacts every string inside dicts, lists and tuples (keys included); other values pass."""
        table = self._refresh() if self._watch is not None else self._table
        if table.pattern is None:
            return obj
        return _redact_data(table, obj)

    def __call__(self, obj: Any) -> Any:
        """``redact_data(obj)``: a Redactor is what an emitter applies to every event's data."""
        return self.redact_data(obj)

    def stream(self) -> SecretStream:
        """A holder for one stream of text deltas (see ``SecretStream``)."""
        return SecretStream(self)

    def __repr__(self) -> str:
        watching = ", watching the environment" if self._watch is not None else ""
        return f"Redactor({', '.join(self.names) or 'nothing'}{watching})"


def _redact(table: _Table, text: str) -> str:
    pattern = table.pattern
    if pattern is None or not text:
        return text
    labels = table.labels
    text = pattern.sub(lambda m: f"[REDACTED:{labels[m.group(0)]}]", text)
    if "\n" in text or "\r" in text:
        text = _redact_wrapped(table, text)
    return text


_BREAKS = re.compile(r"[\r\n]+")
# What wrapped encoded output looks like (base64 -w, xxd -p): a whole line of at least eight
# characters of the encoding's alphabet, or two such lines in a row however short. Text with
# none (a listing, prose, code) skips the second search. Two plain searches: one alternation
# with ``^`` costs ten times as much on a long text.
_LONG_ENCODED_LINE = re.compile(r"(?:\A|\n)[A-Za-z0-9+/=_\-]{8,}\r?(?:\n|\Z)")
_SHORT_ENCODED_LINES = re.compile(r"\n[A-Za-z0-9+/=_\-]+\r?\n[A-Za-z0-9+/=_\-]+\r?\n")


def _redact_wrapped(table: _Table, text: str) -> str:
    """``text`` with the forms that line breaks split (``base64 -w``, ``xxd -p``) replaced whole."""
    pattern = table.pattern
    assert pattern is not None
    if _LONG_ENCODED_LINE.search(text) is None and _SHORT_ENCODED_LINES.search(text) is None:
        return text
    joined = _BREAKS.sub("", text)
    hits = [m for m in pattern.finditer(joined) if len(m.group(0)) >= MIN_SECRET_LENGTH]
    if not hits:
        return text
    kept = [i for i, ch in enumerate(text) if ch not in "\r\n"]  # joined index -> text index
    out = text
    for m in reversed(hits):
        start, end = kept[m.start()], kept[m.end() - 1] + 1
        out = out[:start] + f"[REDACTED:{table.labels[m.group(0)]}]" + out[end:]
    return out


def _redact_data(table: _Table, obj: Any) -> Any:
    if isinstance(obj, str):
        return _redact(table, obj)
    if isinstance(obj, dict):
        return {_redact_data(table, k): _redact_data(table, v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_redact_data(table, v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_redact_data(table, v) for v in obj)
    return obj


class SecretStream:
    """Redacts a stream of text deltas so no secret is ever split between two of them.

    ``feed`` returns the text that may be shown now: the delta (with what was held before)
    redacted, minus a tail that could be the start of a secret, which is held until the next delta
    shows whether it is one. ``flush`` returns what is held when the text block ends. The
    concatenation of everything returned is the redacted text of the whole block.

    Example:
        >>> s = Redactor({"K_TOKEN": "sk-abcdef123456"}).stream()
        >>> s.feed("key sk-abc") + s.feed("def123456 ok") + s.flush()
        'key [REDACTED:K_TOKEN] ok'
    """

    __slots__ = ("_redactor", "held")

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self.held = ""

    def feed(self, text: str) -> str:
        """The part of ``held + text`` that can be shown now, redacted."""
        redactor = self._redactor
        table = redactor._refresh() if redactor._watch is not None else redactor._table
        pattern = table.pattern
        held = self.held
        whole = held + text if held else text
        if pattern is None:
            self.held = ""
            return whole
        # Per token this is the hot path: a delta too short to hold a whole secret skips the search.
        if len(whole) < table.shortest or pattern.search(whole) is None:
            cut = _hold_from(table, whole, len(whole) - table.longest + 1)
            self.held = whole[cut:]
            return whole[:cut]
        # Complete secrets first, then the tail after the last one is checked for a secret's start.
        last = 0
        pieces = []
        labels = table.labels
        for m in pattern.finditer(whole):
            pieces.append(whole[last : m.start()])
            pieces.append(f"[REDACTED:{labels[m.group(0)]}]")
            last = m.end()
        cut = _hold_from(table, whole, max(last, len(whole) - table.longest + 1))
        pieces.append(whole[last:cut])
        self.held = whole[cut:]
        return "".join(pieces)

    def flush(self) -> str:
        """What is held, released at the end of a text block (it was not a secret)."""
        held, self.held = self.held, ""
        return held


def _hold_from(table: _Table, text: str, start: int) -> int:
    """The index from which ``text``'s tail is a proper prefix of some secret form (len: none)."""
    starts, prefixes = table.starts, table.prefixes
    n = len(text)
    if n == 1:  # a one-character delta: the common case, kept cheap
        return 0 if text in prefixes else 1
    for i in range(max(start, 0), n):
        if text[i] not in starts:
            continue
        if n - i <= _PREFIX_CAP:
            if text[i:] in prefixes:
                return i
        elif text[i : i + _PREFIX_CAP] in table.heads:
            tail = text[i:]
            if any(len(form) > len(tail) and form.startswith(tail) for form in table.long_forms):
                return i
    return n
