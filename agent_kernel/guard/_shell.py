"""commands — one shell-aware reading of a command line, used wherever a command is judged.

Permission rules (``bash(git *)``), always-allow answers and the headless ``scripted:`` approval
policy all ask this module the same two questions about a line a model wants to run:

- ``matches(pattern, line, every=True)`` (allow): does every command of the line match, with
  nothing the pattern cannot vouch for? A line is never allowed by a wildcard when it substitutes
  (``$(…)``, backticks, ``<(…)``, ``>(…)``), writes through a redirection (``>``, ``>>``; not
  ``>/dev/null`` or ``2>&1``), cannot be read (unbalanced quotes), or runs a known escape hatch
  (``git -c``, ``find -exec``, ``awk 'BEGIN{system(…)}'``, ``python -c`` …, see ``hatches``).
- ``matches(pattern, line, every=False)`` (deny and ask): does any command of the line match, in
  any spelling? Each command is also tried with its command word normalised (``\\rm``, ``"rm"``,
  ``/bin/rm`` → ``rm``) and with wrappers peeled off one at a time (``command``, ``builtin``,
  ``exec``, ``env VAR=… -i -u X``, ``VAR=…`` prefixes, ``nice``, ``nohup``, ``timeout N``,
  ``sudo``, ``doas``, ``stdbuf``, ``time``, ``setsid``, ``xargs …``); strings run by a shell
  (``sh -c``, ``bash -c``, ``eval``, ``su -c``, ``watch``, ``env -S``, ``echo … | sh``),
  substituted commands and ``find -exec`` targets are read recursively.

Over-reading is the safe direction for both questions: splitting too much can only make an allow
rule stricter and a deny rule wider. What a matcher cannot see (scripts a command runs, aliases
and functions from rc files, a program's own configuration) is listed in ``docs/security.md``.

Parsing is done here, by a small tokenizer that follows bash's quoting rules; reading a line
takes tens to hundreds of microseconds (``benchmarks/command_guard.py``), once per tool call and
never per token. The catalogue of escape hatches lives in ``agent_kernel.guard._hatches``.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from dataclasses import dataclass, field

from agent_kernel.guard._hatches import hatch

__all__ = ["CommandLine", "SimpleCommand", "covering", "has_wildcard", "matches", "parse"]

# Bracket escapes ([*], [?], [[]) stand for literal characters, not wildcards.
_ESCAPED = re.compile(r"\[[*?\[]\]")
# A backstop for deny rules: split at every operator and substitution opener, quotes or not.
_PIECES = re.compile(r"&&|\|\||\$\(|<\(|>\(|[;&|\n()`{}]")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_OPERATORS = ("&&", "||", ";;", "|&", ";", "&", "|", "\n", "(", ")")
_REDIRECTS = ("&>>", "&>", ">>", ">|", ">&", "<<<", "<<-", "<<", "<&", "<>", ">", "<")
_WRITING = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})
# Words that open or close a compound command; the command follows them.
_RESERVED = frozenset({"!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "coproc"})
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "fish", "busybox-sh", "rbash"})
_MAX_DEPTH = 8


def has_wildcard(pattern: str) -> bool:
    """Whether a rule pattern has glob wildcards (bracket escapes like ``[*]`` are literal)."""
    return any(ch in _ESCAPED.sub("", pattern) for ch in "*?[")


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One command of a line (between operators), as written and as run.

    Attributes:
        text: the command as written, trimmed (what an allow rule must match).
        words: its words with quotes removed and redirections left out.
        writes: it redirects output into a file (``>``, ``>>``, ``&>``; not ``/dev/null``).
        forms: ``text`` and every spelling of it with wrappers peeled off, command word normalised.
        hatches: why it must always ask (escape hatches found in any of its forms), if anything.
        nested: lines it makes a shell run (``bash -c``, ``eval``, ``find -exec`` …), parsed.
        opaque: it runs code no reading can know: a command name computed when it runs
            (``$CMD``, ``{r..r}m``) or a shell fed a program by another command (``curl … | sh``).
            Deny and ask rules treat such a command as one they name.
        reads_program: it is a shell that reads its program from stdin (``sh``, ``bash -s``).
    """

    text: str
    words: tuple[str, ...]
    writes: bool
    forms: tuple[str, ...]
    hatches: tuple[str, ...]
    nested: tuple[CommandLine, ...]
    opaque: bool = False
    reads_program: bool = False

    @property
    def clean(self) -> bool:
        """No write, no escape hatch, and everything it nests is clean: a wildcard may allow it."""
        return not self.writes and not self.hatches and all(line.clean for line in self.nested)


@dataclass(frozen=True, slots=True)
class CommandLine:
    """A parsed command line.

    Attributes:
        source: the line as given.
        commands: its commands, split at ``;``, ``&&``, ``||``, ``|``, ``&``, newlines and parentheses.
        substitutions: the bodies of ``$(…)``, backticks, ``<(…)`` and ``>(…)``, parsed.
        problem: why the line could not be read (e.g. an unclosed quote), or None.
    """

    source: str
    commands: tuple[SimpleCommand, ...]
    substitutions: tuple[CommandLine, ...] = ()
    problem: str | None = None
    _forms: tuple[str, ...] = field(default=(), repr=False)

    @property
    def clean(self) -> bool:
        """Readable, substitution-free, and every command clean (see ``SimpleCommand.clean``)."""
        return self.problem is None and not self.substitutions and all(c.clean for c in self.commands)

    @property
    def opaque(self) -> bool:
        """Whether any command (nested or substituted ones included) runs code no reading can know."""
        return (
            any(c.opaque or any(n.opaque for n in c.nested) for c in self.commands)
            or any(s.opaque for s in self.substitutions)
        )

    @property
    def writes(self) -> bool:
        """Whether any command (nested ones included) writes through a redirection."""
        return any(c.writes or any(n.writes for n in c.nested) for c in self.commands) or any(
            s.writes for s in self.substitutions
        )

    @property
    def hatches(self) -> tuple[str, ...]:
        """Every escape hatch in the line, nested commands included."""
        found: list[str] = []
        for c in self.commands:
            found.extend(c.hatches)
            for n in c.nested:
                found.extend(n.hatches)
        for s in self.substitutions:
            found.extend(s.hatches)
        return tuple(dict.fromkeys(found))

    def forms(self) -> tuple[str, ...]:
        """Every text a deny or ask rule is tried against: the line, its pieces, each command in
        each spelling, and the same for everything nested or substituted."""
        return self._forms


# ---- matching ------------------------------------------------------------------------------


def matches(pattern: str, line: str, *, every: bool) -> bool:
    """Whether a rule pattern covers a command line.

    Args:
        pattern: the glob inside ``bash(…)``; without wildcards it is an exact command line.
        line: the command line a model asked to run.
        every: True for allow (every command must match and be clean), False for deny and ask
            (any command in any spelling is enough).

    Example:
        >>> matches("git *", "git status; touch x", every=True)
        False
        >>> matches("rm *", "/bin/rm -rf build", every=False)
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
    # "rm *" also names a bare "rm": try each form with a trailing space too.
    return any(fnmatch.fnmatchcase(f, pattern) or fnmatch.fnmatchcase(f + " ", pattern) for f in parsed.forms())


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


@functools.lru_cache(maxsize=512)
def parse(line: str) -> CommandLine:
    """Parses a command line (cached: the same line is judged by several rules)."""
    return _parse(line, 0)


# ---- tokenizer -----------------------------------------------------------------------------


@dataclass
class _Word:
    raw_start: int
    raw_end: int = -1
    value: list[str] = field(default_factory=list)
    dynamic: bool = False  # holds an unquoted or double-quoted $ expansion
    glob: bool = False  # holds an unquoted *, ? or [ (bash expands it to file names)


@dataclass
class _Segment:
    start: int = -1
    end: int = -1
    words: list[_Word] = field(default_factory=list)
    writes: bool = False


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


def _tokenize(s: str) -> tuple[list[_Segment], list[str], str | None]:
    """Splits ``s`` into segments of words; returns (segments, substitution bodies, problem)."""
    segments: list[_Segment] = [_Segment()]
    subs: list[str] = []
    word: _Word | None = None
    pending_redirect: str | None = None
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

    def end_word(at: int) -> None:
        nonlocal word, pending_redirect
        if word is None:
            return
        word.raw_end = at
        seg().end = at
        if pending_redirect is not None:
            target = "".join(word.value)
            if pending_redirect in _WRITING and target != "/dev/null" and not (
                pending_redirect == ">&" and (target.isdigit() or target == "-")
            ):
                seg().writes = True
            pending_redirect = None
        else:
            seg().words.append(word)
        word = None

    def substitution(at: int, open_: str, close: str, skip: int) -> int:
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
                start_word(i).value.append(_ansi_c(s[i + 2 : j]))
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
                        j = _backtick(s, j, subs, w)
                    else:
                        if d == "$":
                            w.dynamic = True
                        w.value.append(d)
                        j += 1
                i = j + 1
            elif s.startswith("$(", i):
                i = substitution(i, "(", ")", 2)
            elif c == "`":
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
            elif any(s.startswith(op, i) for op in _OPERATORS):
                end_word(i)
                op = next(o for o in _OPERATORS if s.startswith(o, i))
                if pending_redirect is not None:
                    raise _Unreadable(f"a redirection with no target before {op!r}")
                segments.append(_Segment())
                i += len(op)
            else:
                w = start_word(i)
                if c == "$":
                    w.dynamic = True
                elif c in "*?[":
                    w.glob = True
                w.value.append(c)
                i += 1
        end_word(n)
    except _Unreadable as problem:
        return segments, subs, str(problem)
    return [g for g in segments if g.words or g.writes], subs, None


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


def _ansi_c(body: str) -> str:
    try:
        return body.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except (UnicodeDecodeError, ValueError):
        return body


# ---- building the parsed line --------------------------------------------------------------


def _parse(line: str, depth: int) -> CommandLine:
    if depth > _MAX_DEPTH:
        return CommandLine(line, (), (), "commands nested too deeply to judge", (line,))
    segments, sub_texts, problem = _tokenize(line)
    commands = tuple(_command(line, g, depth) for g in segments if g.start >= 0)
    subs = tuple(_parse(t, depth + 1) for t in sub_texts)
    commands = _pipe_into_shell(commands, depth)
    forms: list[str] = [line]
    forms.extend(p.strip() for p in _PIECES.split(line) if p.strip())
    for c in commands:
        forms.extend(c.forms)
        for nested in c.nested:
            forms.extend(nested.forms())
    for sub in subs:
        forms.extend(sub.forms())
    return CommandLine(line, commands, subs, problem, tuple(dict.fromkeys(forms)))


def _command(line: str, g: _Segment, depth: int) -> SimpleCommand:
    words: list[str] = []
    opaque = False
    globbed = {_base("".join(w.value)) for w in g.words if w.glob}
    for w in g.words:
        value = "".join(w.value)
        raw = line[w.raw_start : w.raw_end]
        if "{" in raw and not any(q in raw for q in "'\"\\"):
            expanded = _brace_expand(value)
            if expanded is None:
                opaque = True  # a brace form this reader does not expand ({a..z}, nesting)
            else:
                words.extend(expanded)
                continue
        words.append(value)
    text = line[g.start : g.end].strip()
    forms: list[str] = [text]
    hatches: list[str] = []
    nested_texts: list[str] = []
    reads_program = False
    for view in _views(words, nested_texts):
        forms.append(" ".join(view))
        if "$" in view[0] or "`" in view[0] or view[0] in globbed:
            opaque = True  # /bin/r? is /bin/rm once bash has expanded it
        found = hatch(view)
        if found:
            hatches.append(found)
        if view[0] in _SHELLS and _dash_c(view[1:]) is None:
            plain = [a for a in view[1:] if not a.startswith(("-", "+"))]
            reads_program = not plain or "-s" in view[1:]
    if opaque:
        hatches.append("the command name is computed when it runs ($…, {…}), so no rule can judge it")
    nested = tuple(_parse(t, depth + 1) for t in nested_texts)
    return SimpleCommand(
        text, tuple(words), g.writes, tuple(dict.fromkeys(forms)), tuple(dict.fromkeys(hatches)), nested, opaque, reads_program
    )


_BRACE = re.compile(r"^(.*?)\{([^{}]*)\}(.*)$", re.DOTALL)


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


def _pipe_into_shell(commands: tuple[SimpleCommand, ...], depth: int) -> tuple[SimpleCommand, ...]:
    """``echo 'rm x' | sh``: the text echoed into a shell reading its program from stdin is a line
    too; fed by anything else (``curl … | sh``), the shell runs code no reading can know."""
    out = list(commands)
    for k, cur in enumerate(out):
        if not cur.reads_program:
            continue
        prev = out[k - 1] if k else None
        if prev is not None and prev.words and _base(prev.words[0]) in ("echo", "printf") and not prev.nested:
            args = [w for w in prev.words[1:] if not (w.startswith("-") and len(w) <= 3)]
            inner = _parse(" ".join(args).replace("\\n", "\n"), depth + 1)
            out[k] = SimpleCommand(cur.text, cur.words, cur.writes, cur.forms, cur.hatches, (*cur.nested, inner), cur.opaque, True)
        else:
            hatches = (*cur.hatches, "a shell runs a program it reads from a pipe or a file")
            out[k] = SimpleCommand(cur.text, cur.words, cur.writes, cur.forms, hatches, cur.nested, True, True)
    return tuple(out)


def _base(word: str) -> str:
    return word.rsplit("/", 1)[-1] if "/" in word else word


def _skip_options(args: list[str], with_value: frozenset[str], *, stop_at_dash_dash: bool = True) -> list[str]:
    """``args`` after leading options; options in ``with_value`` take the next word (or ``-oVALUE``)."""
    k = 0
    while k < len(args):
        a = args[k]
        if a == "--" and stop_at_dash_dash:
            return args[k + 1 :]
        if not a.startswith("-") or a == "-":
            break
        if a.startswith("--"):
            name = a.split("=", 1)[0]
            k += 2 if name in with_value and "=" not in a else 1
            continue
        if a[:2] in with_value and len(a) == 2:
            k += 2
        else:
            k += 1
    return args[k:]


_WITH_VALUE = {
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "sudo": frozenset({"-u", "--user", "-g", "--group", "-h", "--host", "-p", "--prompt", "-C", "--close-from", "-D",
                       "--chdir", "-r", "--role", "-t", "--type", "-U", "--other-user", "-T", "--command-timeout", "-R", "--chroot"}),
    "doas": frozenset({"-u", "-C"}),
    "stdbuf": frozenset({"-i", "--input", "-o", "--output", "-e", "--error"}),
    "xargs": frozenset({"-I", "-L", "-n", "-P", "-s", "-d", "-E", "-a", "--arg-file", "--delimiter", "--max-args",
                        "--max-procs", "--max-chars", "--max-lines", "--process-slot-var"}),
    "exec": frozenset({"-a"}),
    "ionice": frozenset({"-c", "-n", "-p", "-P", "-u", "--class", "--classdata"}),
    "watch": frozenset({"-n", "--interval", "-q", "--equexit"}),
    "flock": frozenset({"-w", "--timeout", "-E", "--conflict-exit-code"}),
    "chroot": frozenset({"--userspec", "--groups"}),
    "ssh": frozenset({"-b", "-c", "-D", "-E", "-e", "-F", "-I", "-i", "-J", "-L", "-l", "-m", "-O", "-o", "-p", "-Q", "-R",
                      "-S", "-W", "-w", "-B", "-P"}),
}
# Programs that run the command they are given after options of their own.
_TRACERS = frozenset(
    {"strace", "ltrace", "valgrind", "chrt", "prlimit", "cpulimit", "trickle", "firejail", "proxychains", "proxychains4",
     "torsocks", "catchsegv", "fakeroot", "unshare", "nsenter", "parallel", "entr", "ssh", "systemd-run", "sg",
     "gdb", "perf", "hyperfine"}
)
_PLAIN_WRAPPERS = frozenset({"command", "builtin", "nohup", "time", "setsid", "unbuffer", "busybox", "caffeinate", "chronic"})


def _views(words: list[str], nested: list[str]) -> list[list[str]]:
    """The command with one wrapper after another peeled off (first view: normalised words)."""
    views: list[list[str]] = []
    cur = list(words)
    for _ in range(32):
        while cur and (cur[0] in _RESERVED or _ASSIGNMENT.match(cur[0])):
            cur = cur[1:]
        if not cur:
            break
        cur = [_base(cur[0]), *cur[1:]]
        views.append(cur)
        name, args = cur[0], cur[1:]
        if name in _PLAIN_WRAPPERS:
            rest = _skip_options(args, frozenset())
        elif name in _TRACERS:
            # Their options vary; any later word may be the command they run, so try each.
            views.extend(args[k:] for k in range(len(args)) if not args[k].startswith("-"))
            if name == "ssh":  # the remote command line is the words after the host
                rest = _skip_options(args, _WITH_VALUE["ssh"])[1:]
                if rest:
                    nested.append(" ".join(rest))
            break
        elif name == "env":
            for k, a in enumerate(args):
                if a in ("-S", "--split-string") and k + 1 < len(args):
                    nested.append(" ".join(args[k + 1 :]))
                elif a.startswith(("--split-string=", "-S")) and len(a) > 2:
                    nested.append(a.split("=", 1)[1] if a.startswith("--") else a[2:])
            rest = _skip_options(args, _WITH_VALUE["env"])
        elif name == "timeout":
            rest = _skip_options(args, _WITH_VALUE["timeout"])[1:]
        elif name == "nice" or name == "renice":
            rest = _skip_options([a for a in args if not re.fullmatch(r"-\d+", a)], _WITH_VALUE["nice"])
        elif name == "taskset":
            rest = args[2:] if args[:1] in (["-c"], ["--cpu-list"]) else _skip_options(args, frozenset())[1:]
        elif name == "chroot":
            rest = _skip_options(args, _WITH_VALUE["chroot"])[1:]
        elif name == "flock":
            if "-c" in args or "--command" in args:
                at = args.index("-c") if "-c" in args else args.index("--command")
                nested.append(" ".join(args[at + 1 : at + 2]))
                break
            rest = _skip_options(args, _WITH_VALUE["flock"])[1:]
        elif name in ("sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "rbash") or name in ("su", "runuser", "script"):
            string = _dash_c(args)
            if string is None and name in ("su", "runuser", "script"):  # -c may follow the user
                flag = next((k for k, a in enumerate(args) if a in ("-c", "--command")), None)
                string = args[flag + 1] if flag is not None and flag + 1 < len(args) else None
            if string is not None:
                nested.append(string)
            if string is not None or name not in ("runuser", "su") or "--" not in args:
                break
            rest = args[args.index("--") + 1 :]  # runuser -u USER -- COMMAND
        elif name == "eval":
            nested.append(" ".join(args))
            break
        elif name == "watch":
            rest = _skip_options(args, _WITH_VALUE["watch"])
            if "-x" not in args and "--exec" not in args:
                nested.append(" ".join(rest))
                break
        elif name in _WITH_VALUE:  # sudo, doas, stdbuf, xargs, exec, ionice
            rest = _skip_options(args, _WITH_VALUE[name])
            if name == "xargs" and not rest:
                rest = ["echo"]  # xargs runs echo when given no command
        elif name == "find":
            for target in _find_exec_targets(args):
                nested.append(" ".join(_quote(w) for w in target))
            break
        else:
            break
        if not rest:
            break
        cur = list(rest)
    return views


def _quote(word: str) -> str:
    return word if word and re.fullmatch(r"[A-Za-z0-9_./=:,+@%^-]+", word) else "'" + word.replace("'", "'\\''") + "'"


def _dash_c(args: list[str]) -> str | None:
    """The command string of ``sh -c STRING`` (``-lc``, ``-ec`` and ``--login -c`` included)."""
    for k, a in enumerate(args):
        if a == "--":
            return None
        if a.startswith("-") and not a.startswith("--") and "c" in a[1:]:
            return args[k + 1] if k + 1 < len(args) else None
        if a == "--command":
            return args[k + 1] if k + 1 < len(args) else None
        if not a.startswith("-") and not a.startswith("+"):
            return None
    return None


def _find_exec_targets(args: list[str]) -> list[list[str]]:
    targets: list[list[str]] = []
    k = 0
    while k < len(args):
        if args[k] in ("-exec", "-execdir", "-ok", "-okdir"):
            j = k + 1
            while j < len(args) and args[j] not in (";", "+"):
                j += 1
            targets.append(args[k + 1 : j])
            k = j
        k += 1
    return targets
