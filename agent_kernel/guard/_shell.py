"""shell — one shell-aware reading of a command line, used wherever a command is judged.

Permission rules (``bash(git *)``), always-allow answers and the headless ``scripted:`` approval
policy all ask this module the same two questions about a line a model wants to run, and both
answers follow one principle: **what cannot be read exactly is treated as matching a deny or ask
rule, and never as matching an allow rule.**

- ``matches(pattern, line, every=True)`` (allow): does every command of the line match, read
  exactly and literally? A line is never allowed by a wildcard when any word in it is computed
  when it runs (``$X``, ``${X:+-c}``, ``$(…)``, backticks, ``<(…)``, a glob that could expand into
  an option), it writes (a redirection, or a write option such as ``git log --output``), it cannot
  be read (unbalanced quotes, limits reached), or it runs a known escape hatch (``git -c``,
  ``find -exec``, ``python -c`` …, see ``_hatches``).
- ``matches(pattern, line, every=False)`` (deny and ask): could any command of the line be the
  one the rule names? It matches when some command is, in any spelling (``\\rm``, ``/bin/rm``,
  wrappers peeled off: ``env``, ``sudo``, ``nice``, ``time`` …; strings a shell runs read as lines:
  ``sh -c``, ``eval``, ``find -exec``, ``echo … | sh``), and also whenever the reader cannot prove
  it is not: a doubt (a limit reached, a shell whose program it cannot locate, a computed word
  where it decides what runs, a builtin that stores code or names for later, ``xargs`` handing a
  shell its program) or the rule's program name among the arguments of a program not known to
  leave its arguments alone (``setarch x86_64 rm v``).

A command's doubts are listed in ``SimpleCommand.doubts`` so a refusal can say why.
What no reading can see (scripts a command runs, rc files, a program's configuration) is listed
in ``docs/security.md``. This module splits a line into commands and words (bash's quoting,
here-documents, substitutions) and matches rules; ``agent_kernel.guard._programs`` reads what
each command runs; the catalogue of programs (escape hatches, wrappers' options, programs that
never run their arguments) lives in ``agent_kernel.guard._hatches``.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import re
from dataclasses import dataclass, field

from agent_kernel.guard._programs import DYNAMIC, GLOB, Reading, base, computed, marked, plain, read

MAX_CHARS = 1_000_000
"""Longer lines are not read: they match every deny and ask rule and no allow rule."""

# Bracket escapes ([*], [?], [[]) stand for literal characters, not wildcards.
_ESCAPED = re.compile(r"\[[*?\[]\]")
# A backstop for deny rules: split at every operator and substitution opener, quotes or not.
_PIECES = re.compile(r"&&|\|\||\$\(|<\(|>\(|[;&|\n()`{}]")
_SEPARATOR_ENDS = frozenset(";&|\n()`{}")
# Characters with no meaning to the tokenizer, read in one step (a 400 KB line stays fast).
_PLAIN_RUN = re.compile(r"[^\s\\'\"$`<>&;|()#*?\[{}\n]+")
_QUOTED_RUN = re.compile(r'[^"\\$`]+')
# The words a program name may hide among: what is left after cutting at everything else.
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.+-]+")
_OPERATORS = ("&&", "||", ";;", "|&", ";", "&", "|", "\n", "(", ")")
_OPERATOR_STARTS = frozenset(op[0] for op in _OPERATORS)
_REDIRECTS = ("&>>", "&>", ">>", ">|", ">&", "<<<", "<<-", "<<", "<&", "<>", ">", "<")
_WRITING = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})
# Paths bash opens as network connections in a redirection, whatever the direction.
_NETWORK_PATH = re.compile(r"/dev/+(?:\.?/+)*(?:tcp|udp)\b")
_MAX_DEPTH = 8
_MAX_WORDS = 1_500


def has_wildcard(pattern: str) -> bool:
    """Whether a rule pattern has glob wildcards (bracket escapes like ``[*]`` are literal)."""
    return any(ch in _ESCAPED.sub("", pattern) for ch in "*?[")


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One command of a line (between operators), as written and as run.

    Attributes:
        text: the command as written, trimmed (what an allow rule must match).
        words: its words with quotes removed and redirections left out.
        writes: it writes a file (a redirection such as ``>``, not ``/dev/null``) or makes bash open
            a network connection (a redirection from or to ``/dev/tcp/…``).
        forms: ``text`` and every spelling of it with wrappers peeled off, command word normalised.
        hatches: why it must always ask (escape hatches found in any of its forms), if anything.
        nested: lines it makes a shell run (``bash -c``, ``eval``, ``find -exec`` …), parsed.
        doubts: why the reader cannot prove what it runs (a computed name, a shell fed a program
            by another command, a builtin storing code …). Deny and ask rules match such a
            command; allow rules never do.
        names: the arguments of programs that may run their arguments, as text: a deny rule whose
            program name stands among them as a word matches (``setarch x86_64 rm v``).
        computed: some word is computed when it runs (an allow rule never covers it).
        reads_program: it is a shell that reads its program from stdin (``sh``, ``bash -s``).
        may_run: it is a program that may run what its arguments or its input say (not one
            known to leave them alone, like ``cat``).
    """

    text: str
    words: tuple[str, ...]
    writes: bool
    forms: tuple[str, ...]
    hatches: tuple[str, ...]
    nested: tuple[CommandLine, ...]
    doubts: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    computed: bool = False
    reads_program: bool = False
    may_run: bool = False

    @property
    def opaque(self) -> bool:
        """Whether it may run code no reading can know (it has doubts)."""
        return bool(self.doubts)

    @property
    def clean(self) -> bool:
        """Read exactly and literally, with no write, hatch or doubt, nested lines too: a wildcard may allow it."""
        return (
            not self.writes and not self.hatches and not self.doubts and not self.computed
            and all(line.clean for line in self.nested)
        )


@dataclass(frozen=True, slots=True)
class CommandLine:
    """A parsed command line.

    Attributes:
        source: the line as given.
        commands: its commands, split at ``;``, ``&&``, ``||``, ``|``, ``&``, newlines and parentheses.
        substitutions: the bodies of ``$(…)``, backticks, ``<(…)`` and ``>(…)``, parsed.
        problem: why the line could not be read (an unclosed quote, a limit reached), or None.
    """

    source: str
    commands: tuple[SimpleCommand, ...]
    substitutions: tuple[CommandLine, ...] = ()
    problem: str | None = None

    def _lines(self) -> list[CommandLine]:
        """This line and every line nested or substituted in it, at any depth."""
        out, todo = [], [self]
        while todo:
            line = todo.pop()
            out.append(line)
            todo.extend(line.substitutions)
            for c in line.commands:
                todo.extend(c.nested)
        return out

    @property
    def clean(self) -> bool:
        """Readable, substitution-free, and every command clean (see ``SimpleCommand.clean``)."""
        return self.problem is None and not self.substitutions and all(c.clean for c in self.commands)

    @property
    def doubts(self) -> tuple[str, ...]:
        """Every reason, anywhere in the line, why it cannot be read exactly (problems included)."""
        found: list[str] = []
        for line in self._lines():
            if line.problem is not None:
                found.append(line.problem)
            for c in line.commands:
                found.extend(c.doubts)
        return tuple(dict.fromkeys(found))

    @property
    def opaque(self) -> bool:
        """Whether any part of the line runs code no reading can know (deny and ask rules match it)."""
        return bool(self.doubts)

    @property
    def names(self) -> tuple[str, ...]:
        """Every argument handed to a program that may run its arguments (``SimpleCommand.names``)."""
        return tuple(n for line in self._lines() for c in line.commands for n in c.names)

    @property
    def writes(self) -> bool:
        """Whether any command (nested ones included) writes through a redirection."""
        return any(c.writes for line in self._lines() for c in line.commands)

    @property
    def hatches(self) -> tuple[str, ...]:
        """Every escape hatch in the line, nested commands included."""
        return tuple(dict.fromkeys(h for line in self._lines() for c in line.commands for h in c.hatches))

    def forms(self) -> tuple[str, ...]:
        """Every text a deny or ask rule is tried against: the line, its pieces, each command in
        each spelling, and the same for everything nested or substituted."""
        forms: list[str] = []
        for line in self._lines():
            forms.append(line.source)
            forms.extend(p.strip() for p in _PIECES.split(line.source) if p.strip())
            for c in line.commands:
                forms.extend(c.forms)
        return tuple(dict.fromkeys(forms))


# ---- matching ------------------------------------------------------------------------------


def matches(pattern: str, line: str, *, every: bool) -> bool:
    """Whether a rule pattern covers a command line.

    Args:
        pattern: the glob inside ``bash(…)``; without wildcards it is an exact command line.
        line: the command line a model asked to run.
        every: True for allow (every command must match, read exactly and clean), False for deny
            and ask (any command in any spelling, or anything the reader cannot read exactly).

    Example:
        >>> matches("git *", "git status; touch x", every=True)
        False
        >>> matches("rm *", "/bin/rm -rf build", every=False)
        True
        >>> matches("rm *", "bash ${PWD:+-c} 'rm x'", every=False)
        True
    """
    if every:
        if not has_wildcard(pattern):
            return fnmatch.fnmatchcase(line.strip(), pattern)  # exactly this line ([*] stands for *)
        parsed = parse(line)
        if not parsed.clean or not parsed.commands:
            return False
        return all(fnmatch.fnmatchcase(c.text, pattern) for c in parsed.commands)
    if fnmatch.fnmatchcase(line, pattern):
        return True
    parsed = parse(line)
    if parsed.opaque:  # it could be anything, so it could be what the rule names
        return True
    head = pattern.split(None, 1)[0] if pattern.strip() else pattern
    if head and any(_names_word(text, head) for text in parsed.names):
        return True  # handed to a program that may run it
    # "rm *" also names a bare "rm": try each form with a trailing space too. Only a form that
    # starts with the pattern's literal prefix can match, so the rest are skipped unmatched.
    prefix = re.split(r"[*?\[]", pattern, maxsplit=1)[0]
    head = prefix.strip()

    def hit(form: str) -> bool:
        return (form + " ").startswith(prefix) and (
            fnmatch.fnmatchcase(form, pattern) or fnmatch.fnmatchcase(form + " ", pattern)
        )

    for part in parsed._lines():
        if any(hit(f) for c in part.commands for f in c.forms):
            return True
        # The backstop: every piece between operators, quotes or not, as written.
        if head in part.source and any(hit(p) for p in _pieces_starting(part.source, head)):
            return True
    return False


def _names_word(text: str, head: str) -> bool:
    """Whether ``head`` (a program name, maybe a glob) stands in ``text`` as a word of its own."""
    if has_wildcard(head):
        return any(fnmatch.fnmatchcase(t, head) for t in _NAME_CHARS.split(text) if t)
    return head in text and _word_pattern(head).search(text) is not None


@functools.lru_cache(maxsize=64)
def _word_pattern(name: str) -> re.Pattern[str]:
    return re.compile(r"(?<![A-Za-z0-9_.+-])" + re.escape(name) + r"(?![A-Za-z0-9_.+-])")


def _pieces_starting(source: str, head: str) -> list[str]:
    """The pieces of ``source`` between operators (quotes or not) that start with ``head``."""
    if not head:
        return [p.strip() for p in _PIECES.split(source) if p.strip()]
    out = []
    at = source.find(head)
    while at >= 0:
        start = at
        while start and source[start - 1] in " \t":
            start -= 1
        if not start or source[start - 1] in _SEPARATOR_ENDS:  # every operator ends with one of these
            end = _PIECES.search(source, at)
            out.append(source[at : end.start() if end else len(source)].strip())
        at = source.find(head, at + 1)
    return out


def doubts(line: str) -> tuple[str, ...]:
    """Why ``line`` cannot be read exactly (empty when it can): what a refusal can tell the person."""
    return parse(line).doubts


def covering(patterns: list[str], line: str) -> list[str] | None:
    """The wildcard patterns that together allow ``line``, one per command, or None.

    ``git log | head -3`` is allowed by ``git *`` and ``head *`` together: each command must match
    some pattern, and the line must be clean as for ``matches(..., every=True)``.
    """
    wild = [p for p in patterns if has_wildcard(p)]
    if not wild:
        return None
    parsed = parse(line)
    if not parsed.clean or not parsed.commands:
        return None
    used: list[str] = []
    for c in parsed.commands:
        hit = next((p for p in wild if fnmatch.fnmatchcase(c.text, p)), None)
        if hit is None:
            return None
        if hit not in used:
            used.append(hit)
    return used


def parse(line: str) -> CommandLine:
    """Parses a command line (cached: the same line is judged by several rules; a few long lines
    are kept apart from many short ones, so the cache stays small)."""
    return _parse_short(line) if len(line) <= 4096 else _parse_long(line)


@functools.lru_cache(maxsize=512)
def _parse_short(line: str) -> CommandLine:
    return _parse(line, 0, _Budget())


@functools.lru_cache(maxsize=4)
def _parse_long(line: str) -> CommandLine:
    if len(line) > MAX_CHARS:
        return CommandLine(line, (), (), f"the line is longer than {MAX_CHARS} characters, too long to read")
    return _parse(line, 0, _Budget())


def clear_cache() -> None:
    """Forgets every line read so far (benchmarks judge a line afresh each round)."""
    _parse_short.cache_clear()
    _parse_long.cache_clear()


# ---- tokenizer -----------------------------------------------------------------------------


@dataclass
class _Word:
    raw_start: int
    raw_end: int = -1
    value: list[str] = field(default_factory=list)
    dynamic: bool = False  # holds an unquoted or double-quoted $ expansion
    glob: bool = False  # holds an unquoted *, ? or [ (bash expands it to file names)
    brace: bool = False  # holds an unquoted { (bash may expand it: {a,b})


@dataclass
class _Segment:
    start: int = -1
    end: int = -1
    words: list[_Word] = field(default_factory=list)
    writes: bool = False
    fed: list[str] = field(default_factory=list)  # here-strings and here-document bodies: its stdin
    computed_target: bool = False  # a redirection's file is computed when it runs


def _closing(s: str, i: int, open_: str, close: str) -> int:
    """The index just past the ``close`` matching the ``open_`` before ``i``, skipping quotes; -1 if none."""
    depth, n = 1, len(s)
    while i < n:
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            j = s.find("'", i + 1)
            if j < 0:
                return -1
            i = j + 1
            continue
        if c == '"':
            j = i + 1
            while j < n and s[j] != '"':
                j += 2 if s[j] == "\\" else 1
            if j >= n:
                return -1
            i = j + 1
            continue
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


def _tokenize(s: str, budget: _Budget) -> tuple[list[_Segment], list[str], str | None]:
    """Splits ``s`` into segments of words; returns (segments, substitution bodies, problem)."""
    segments: list[_Segment] = [_Segment()]
    subs: list[str] = []
    word: _Word | None = None
    pending_redirect: str | None = None
    heredocs: list[tuple[str, bool, bool, _Segment]] = []  # (delimiter, quoted, tabs stripped, its command)
    i, n = 0, len(s)

    def seg() -> _Segment:
        return segments[-1]

    def start_word(at: int) -> _Word:
        nonlocal word
        if word is None:
            word = _Word(at)
            if seg().start < 0:
                seg().start = at
        return word

    def spend() -> None:
        budget.words -= 1
        if budget.words < 0:
            raise _Unreadable(f"more than {_MAX_WORDS} words, too many to read")

    def end_word(at: int) -> None:
        nonlocal word, pending_redirect
        if word is None:
            return
        word.raw_end = at
        seg().end = at
        spend()
        if pending_redirect is not None:
            target = "".join(word.value)
            if pending_redirect in _WRITING and target != "/dev/null" and not (
                pending_redirect == ">&" and (target.isdigit() or target == "-")
            ):
                seg().writes = True
            if _NETWORK_PATH.search(target) or _NETWORK_PATH.search(s[word.raw_start : at]):
                seg().writes = True  # bash itself connects: cat < /dev/tcp/host/80 reaches the network
            if word.dynamic and pending_redirect not in ("<<", "<<-"):
                seg().computed_target = True  # cat < $F may open /dev/tcp/… as well as a file
            if pending_redirect in ("<<", "<<-"):  # its body starts after the next newline
                before = s[s.rfind("\n", 0, word.raw_start) + 1 : word.raw_start]
                if "((" in before or "$[" in before:  # 1 << 2 is a shift there, not a here-document
                    raise _Unreadable("'<<' in a line with arithmetic, which this reader cannot tell from a here-document")
                raw = s[word.raw_start : at]
                heredocs.append((target, any(q in raw for q in "'\"\\"), pending_redirect == "<<-", seg()))
            elif pending_redirect == "<<<":
                seg().fed.append(target)
            pending_redirect = None
        else:
            seg().words.append(word)
        word = None

    def substitution(at: int, open_: str, close: str, skip: int) -> int:
        spend()
        body_end = _closing(s, at + skip, open_, close)
        if body_end < 0:
            raise _Unreadable(f"an unclosed {s[at:at + skip]!r}")
        subs.append(s[at + skip : body_end - 1])
        w = start_word(at)
        w.value.append(s[at:body_end])
        w.dynamic = True
        return body_end

    try:
        while i < n:
            c = s[i]
            if c in " \t":
                end_word(i)
                i += 1
            elif c == "\\":
                if i + 1 < n and s[i + 1] == "\n":
                    i += 2  # a line continuation joins the lines
                    continue
                start_word(i).value.append(s[i + 1 : i + 2])
                i += 2
            elif c == "'":
                j = s.find("'", i + 1)
                if j < 0:
                    raise _Unreadable("an unclosed single quote")
                start_word(i).value.append(s[i + 1 : j])
                i = j + 1
            elif c == "$" and s.startswith("$'", i):
                j = i + 2
                while j < n and s[j] != "'":
                    j += 2 if s[j] == "\\" else 1
                if j >= n:
                    raise _Unreadable("an unclosed $'...' quote")
                text, exact = _ansi_c(s[i + 2 : j])
                w = start_word(i)
                w.value.append(text)
                w.dynamic = w.dynamic or not exact
                i = j + 1
            elif c == '"':
                w = start_word(i)
                j = i + 1
                while True:
                    if j >= n:
                        raise _Unreadable("an unclosed double quote")
                    d = s[j]
                    if d == '"':
                        break
                    if d == "\\" and j + 1 < n:
                        nxt = s[j + 1]
                        w.value.append(nxt if nxt in '$`"\\\n' else "\\" + nxt)
                        j += 2
                    elif s.startswith("$(", j):
                        j = substitution(j, "(", ")", 2)
                    elif d == "`":
                        spend()
                        j = _backtick(s, j, subs, w)
                    else:
                        if d == "$":
                            w.dynamic = True
                        run = _QUOTED_RUN.match(s, j + 1)
                        k = run.end() if run else j + 1
                        w.value.append(s[j:k])
                        j = k
                i = j + 1
            elif s.startswith("$(", i):
                i = substitution(i, "(", ")", 2)
            elif c == "`":
                spend()
                i = _backtick(s, i, subs, start_word(i))
            elif c in "<>" and s.startswith("(", i + 1):
                end_word(i)
                i = substitution(i, "(", ")", 2)
                end_word(i)
            elif c == "#" and word is None:
                j = s.find("\n", i)
                i = n if j < 0 else j
            elif c == "&" and s.startswith("&>", i):
                end_word(i)
                op = "&>>" if s.startswith("&>>", i) else "&>"
                pending_redirect = op
                i += len(op)
            elif c in "<>":
                # "2>" and "10>&1": digits just before belong to the redirection.
                if word is not None and "".join(word.value).isdigit() and word.raw_start >= 0 and s[word.raw_start:i].isdigit():
                    word = None
                end_word(i)
                op = next(o for o in _REDIRECTS if s.startswith(o, i))
                pending_redirect = op
                i += len(op)
            elif c in _OPERATOR_STARTS:
                end_word(i)
                op = next(o for o in _OPERATORS if s.startswith(o, i))
                if pending_redirect is not None:
                    raise _Unreadable(f"a redirection with no target before {op!r}")
                segments.append(_Segment())
                i += len(op)
                if op == "\n" and heredocs:
                    i = _heredoc_bodies(s, i, heredocs, subs)
                    heredocs.clear()
            else:
                w = start_word(i)
                if c == "$":
                    w.dynamic = True
                elif c in "*?[":
                    w.glob = True
                elif c == "{":
                    w.brace = True
                run = _PLAIN_RUN.match(s, i + 1)
                j = run.end() if run else i + 1
                w.value.append(s[i:j])
                i = j
        end_word(n)
        if pending_redirect is not None:
            raise _Unreadable(f"a redirection {pending_redirect!r} with no target")
    except _Unreadable as problem:
        return segments, subs, str(problem)
    return [g for g in segments if g.words or g.writes], subs, None


def _heredoc_bodies(s: str, i: int, heredocs: list[tuple[str, bool, bool, _Segment]], subs: list[str]) -> int:
    """Skips the here-document bodies that start at ``i`` (data, not commands); the substitutions
    in a body whose delimiter is unquoted run, so they are read. Returns where the next line starts."""
    for delimiter, quoted, strip_tabs, segment in heredocs:
        start = i
        end = _delimiter_line(s, i, delimiter, strip_tabs)
        if end is None:
            body, i = s[start:], len(s)  # bash reads to the end of the input
        else:
            body, i = s[start : end[0]], end[1] + 1
        segment.fed.append(body)
        if not quoted:
            _body_substitutions(body, subs)
    return min(i, len(s))


def _delimiter_line(s: str, i: int, delimiter: str, strip_tabs: bool) -> tuple[int, int] | None:
    """Where the line that closes a here-document begins and ends, searching from ``i``; or None."""
    if strip_tabs:
        found = re.compile("^\t*" + re.escape(delimiter) + "$", re.MULTILINE).search(s, i)
        return None if found is None else (found.start(), found.end())
    at = s.find("\n" + delimiter, i - 1)
    while at >= 0:
        end = at + 1 + len(delimiter)
        if end == len(s) or s[end] == "\n":
            return at + 1, end
        at = s.find("\n" + delimiter, at + 1)
    return None


def _body_substitutions(body: str, subs: list[str]) -> None:
    """The ``$(…)`` and backtick substitutions bash runs in an unquoted here-document body."""
    k = 0
    while k < len(body):
        if body[k] == "\\":
            k += 2
        elif body.startswith("$(", k):
            end = _closing(body, k + 2, "(", ")")
            if end < 0:
                raise _Unreadable("an unclosed '$(' in a here-document")
            subs.append(body[k + 2 : end - 1])
            k = end
        elif body[k] == "`":
            end = body.find("`", k + 1)
            if end < 0:
                raise _Unreadable("an unclosed backtick in a here-document")
            subs.append(body[k + 1 : end])
            k = end + 1
        else:
            k += 1


class _Unreadable(Exception):
    pass


def _backtick(s: str, i: int, subs: list[str], w: _Word) -> int:
    j = i + 1
    while j < len(s) and s[j] != "`":
        j += 2 if s[j] == "\\" else 1
    if j >= len(s):
        raise _Unreadable("an unclosed backtick")
    subs.append(s[i + 1 : j])
    w.value.append(s[i : j + 1])
    w.dynamic = True
    return j + 1


_ANSI_C_SIMPLE = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
                  "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}
_ANSI_C_NUMBER = re.compile(r"[0-7]{1,3}|x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}")


def _ansi_c(body: str) -> tuple[str, bool]:
    """The text of a ``$'…'`` quote as bash decodes it, and whether it is known exactly.

    Bash's escapes differ from any other language's (``\\u72`` takes one to four digits, ``\\x7``
    one or two, a NUL ends the string, ``\\c`` and characters past ASCII depend on the locale):
    anything this reader does not decode exactly as bash does is reported as not exact, so the
    word counts as computed (a deny rule matches it, an allow rule never does).
    """
    out: list[str] = []
    exact = True
    k = 0
    while k < len(body):
        c = body[k]
        if c != "\\" or k + 1 == len(body):
            out.append(c)
            k += 1
            continue
        e = body[k + 1]
        if e in _ANSI_C_SIMPLE:
            out.append(_ANSI_C_SIMPLE[e])
            k += 2
            continue
        number = _ANSI_C_NUMBER.match(body, k + 1)
        if number is None:
            exact = exact and e != "c"  # \cX is a control character; anything else stays as written
            out.append("\\" + e)
            k += 2
            continue
        digits = number.group()
        code = int(digits, 8) if digits[0] in "01234567" else int(digits[1:], 16)
        if digits[0] in "01234567":
            code &= 0xFF
        if code == 0 or code > 0x7F:
            exact = False  # a NUL ends the word there; other characters depend on the locale
        out.append(chr(min(code, 0x10FFFF)))
        k = number.end()
    return "".join(out), exact

# ---- building the parsed line --------------------------------------------------------------


@dataclass
class _Budget:
    """Words left to read in one line, nested and substituted lines included: reading stops,
    failing closed, before a huge line could keep the caller waiting."""

    words: int = _MAX_WORDS


def _parse(line: str, depth: int, budget: _Budget) -> CommandLine:
    if depth > _MAX_DEPTH:
        return CommandLine(line, (), (), f"commands nested more than {_MAX_DEPTH} deep, too deep to read")
    if budget.words <= 0:
        return CommandLine(line, (), (), f"more than {_MAX_WORDS} words, too many to read")
    segments, sub_texts, problem = _tokenize(line, budget)
    if problem is None and _code_in_subscript(line):
        problem = "an array subscript holds $(…) or a backtick, which bash runs when it evaluates the subscript, quotes or not"
    commands = tuple(_command(line, g, depth, budget) for g in segments if g.start >= 0)
    subs = tuple(_parse(t, depth + 1, budget) for t in sub_texts)
    commands = _pipe_into_shell(commands, depth, budget)
    return CommandLine(line, commands, subs, problem)


def _command(line: str, g: _Segment, depth: int, budget: _Budget) -> SimpleCommand:
    words: list[str] = []
    reading = Reading()
    for w in g.words:
        value = "".join(w.value)
        mark = DYNAMIC if w.dynamic else GLOB if w.glob else ""
        if w.brace:
            raw = line[w.raw_start : w.raw_end]
            expanded = None if any(q in raw for q in "'\"\\$`") else _brace_expand(value)
            if expanded is None:
                words.append(DYNAMIC + value)  # a brace form this reader does not expand ({a..z}, quotes)
            else:
                words.extend(mark + e for e in expanded)
            continue
        words.append(mark + value)
    any_computed = any(computed(w) for w in words) or bool(words and marked(words[0])) or g.computed_target
    read(words, reading)
    if reading.may_run:  # what it reads on stdin may be a program too (at now <<< 'rm x')
        reading.names.extend(g.fed)
    text = line[g.start : g.end].strip()
    forms = [text, *(" ".join(plain(w) for w in view) for view in reading.views)]
    nested = tuple(_parse(t, depth + 1, budget) for t in reading.nested)
    hatches = list(reading.hatches)
    if reading.doubts:
        hatches.append("it cannot be read exactly: " + reading.doubts[0])
    return SimpleCommand(
        text, tuple(plain(w) for w in words), g.writes or reading.writes, tuple(dict.fromkeys(forms)),
        tuple(dict.fromkeys(hatches)), nested, tuple(dict.fromkeys(reading.doubts)), tuple(reading.names),
        any_computed, reading.reads_program, reading.may_run,
    )


_BRACE = re.compile(r"^(.*?)\{([^{}]*)\}(.*)$", re.DOTALL)


_SUBSCRIPT_TOKENS = re.compile(r"\w\[|\]|\$\(|`")


def _code_in_subscript(line: str) -> bool:
    """Whether a substitution stands inside an array subscript anywhere in ``line``, quoted or not.

    Bash expands and evaluates a subscript when it reads or assigns the element (``${a['$(…)']}``,
    ``(( 'a[$(…)]' ))``, ``{a['$(…)']}>f``, ``read 'a[$(…)]'``), so code hidden there in quotes
    still runs. One linear pass over the subscript brackets (a 400 KB line stays fast).
    """
    if "[" not in line or ("$(" not in line and "`" not in line):
        return False
    depth = 0
    for m in _SUBSCRIPT_TOKENS.finditer(line):
        token = m.group()
        if token == "]":
            depth = max(0, depth - 1)
        elif token.endswith("["):
            depth += 1
        elif depth:
            return True
    return False


def _brace_expand(word: str, budget: int = 64) -> list[str] | None:
    """Bash's ``{a,b}`` expansion of one word (``{r,m}`` → ``r m``); None for forms not read here."""
    m = _BRACE.match(word)
    if m is None:
        return None if "{" in word and "}" in word[word.index("{") :] else [word]
    prefix, body, suffix = m.groups()
    if ".." in body and "," not in body:
        return None
    if "," not in body:
        rest = _brace_expand(suffix, budget)
        return None if rest is None else [prefix + "{" + body + "}" + r for r in rest]
    out: list[str] = []
    for alternative in body.split(","):
        expanded = _brace_expand(prefix + alternative + suffix, budget - len(out))
        if expanded is None or len(out) + len(expanded) > budget:
            return None
        out.extend(expanded)
    return [w for w in out if w]


def _pipe_into_shell(commands: tuple[SimpleCommand, ...], depth: int, budget: _Budget) -> tuple[SimpleCommand, ...]:
    """``echo 'rm x' | sh``: the text echoed into a shell reading its program from stdin is a line
    too; fed by anything else (``curl … | sh``, ``sh < file``), the shell runs code no reading can know."""
    out = list(commands)
    for k, cur in enumerate(out):
        if not cur.reads_program:
            prev = out[k - 1] if k else None
            if cur.may_run and prev is not None and prev.words and base(prev.words[0]) in ("echo", "printf"):
                out[k] = dataclasses.replace(cur, names=(*cur.names, *prev.words[1:]))  # echo 'rm x' | at now
            continue
        prev = out[k - 1] if k else None
        text = _printed(prev) if prev is not None else None
        if text is not None:
            inner = _parse(text, depth + 1, budget)
            out[k] = dataclasses.replace(cur, nested=(*cur.nested, inner))
        else:
            why = "a shell runs a program it reads from a pipe or a file"
            out[k] = dataclasses.replace(cur, hatches=(*cur.hatches, why), doubts=(*cur.doubts, why))
    return tuple(out)


def _printed(command: SimpleCommand) -> str | None:
    """What ``echo …`` or ``printf …`` writes, when it can be known exactly; otherwise None."""
    words = list(command.words)
    if not words or command.nested or command.doubts or command.computed or base(words[0]) not in ("echo", "printf"):
        return None
    if base(words[0]) == "echo":
        args = words[1:]
        while args and re.fullmatch(r"-[neE]+", args[0]):
            args = args[1:]
        text = " ".join(args)
        return None if "\\" in text else text  # echo -e and xpg_echo turn escapes into characters
    args = words[1:2] == ["--"] and words[2:] or words[1:]
    if not args:
        return None
    fmt, rest = args[0], args[1:]
    if fmt in ("%s", "%s\\n") and len(rest) == 1 and "\\" not in rest[0]:
        return rest[0]
    if "%" in fmt.replace("%%", "") or rest or "\\" in fmt.replace("\\n", ""):
        return None  # a format this reader does not apply
    return fmt.replace("%%", "%").replace("\\n", "\n")
