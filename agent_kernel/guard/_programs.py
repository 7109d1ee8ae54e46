"""programs — what one command runs: wrappers peeled off, a shell's program located, doubts noted.

``agent_kernel.guard._shell`` splits a line into commands and words; this module reads one
command's words the way bash and the programs it starts would: ``env -iu HOME rm v`` runs ``rm v``,
``bash -o errexit -c 'rm v'`` runs the line ``rm v``, ``xargs sh -c`` runs whatever it reads. Where
it cannot locate what runs exactly (a computed word where the program or an option is, a shell
given a script or a descriptor, a builtin storing code for later, too many wrappers), it notes a
doubt, and every deny and ask rule then matches the command.

Words arrive marked: a word bash computes when it runs starts with ``DYNAMIC`` (an expansion or
substitution) or ``GLOB`` (an unquoted ``*``, ``?`` or ``[``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from agent_kernel.guard._hatches import EXPANDING_SUBSCRIPT, INERT, WITH_VALUE, evaluates_subscript, hatch, is_code_variable, stores_code

DYNAMIC = "\x00"
GLOB = "\x01"
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "fish", "busybox-sh", "rbash"})
# Words that open or close a compound command; the command follows them.
_RESERVED = frozenset({"!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "coproc"})
_MAX_PEEL = 32
_TRACER_STARTS = 4  # words after a tracer tried as the start of its command
_MAX_VIEWS = 128  # views of one command, tracers' candidate starts included


def marked(word: str) -> bool:
    """Whether bash computes this word when it runs (an expansion, a substitution, a glob)."""
    return word[:1] in (DYNAMIC, GLOB)


def computed(word: str) -> bool:
    """A word whose value could decide what runs: an expansion or substitution (which may also
    split into several words), or a glob that could expand into an option (``*``, ``-*``)."""
    return word[:1] == DYNAMIC or (word[:1] == GLOB and word[1:2] in ("*", "?", "[", "-", ""))


def plain(word: str) -> str:
    return word[1:] if marked(word) else word


@dataclass
class Reading:
    """What reading one command found, wrapper by wrapper."""

    views: list[list[str]] = field(default_factory=list)
    nested: list[str] = field(default_factory=list)
    doubts: list[str] = field(default_factory=list)
    hatches: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    reads_program: bool = False
    writes: bool = False
    may_run: bool = False  # the program may run what its arguments or its input say

    def doubt(self, why: str) -> None:
        self.doubts.append(why)

    def name_words(self, words: list[str]) -> None:
        """Words a program may run: the rule's program name among them counts as a hit."""
        self.may_run = True
        for w in words:
            self.names.append(plain(w))


def read(words: list[str], r: Reading) -> None:
    """Reads one command's words into ``r``: peels wrappers off one after another, noting each view, nested line and doubt."""
    cur = list(words)
    for _ in range(_MAX_PEEL):
        while cur and (cur[0] in _RESERVED or ASSIGNMENT.match(plain(cur[0]))):
            if cur[0] not in _RESERVED:
                name, _, value = plain(cur[0]).partition("=")
                if is_code_variable(name.rstrip("+").split("[", 1)[0]):
                    r.doubt(f"it sets {name}, which the shell runs or searches later")
                r.names.append(value)  # a stored value may run later (a[$(…)] in arithmetic)
                if EXPANDING_SUBSCRIPT.search(value):
                    r.doubt(f"it stores {value!r}, whose array subscript runs commands if the value is used in arithmetic")
            cur = cur[1:]
        if not cur:
            return
        if marked(cur[0]):
            r.doubt(f"the command name {plain(cur[0])!r} is computed when it runs")
            return
        if len(r.views) >= _MAX_VIEWS:
            r.doubt(f"more than {_MAX_VIEWS} ways to read one command")
            return
        cur = [base(cur[0]), *cur[1:]]
        r.views.append(cur)
        inner = _inner(cur, r)
        if not inner:
            return
        cur = inner
    r.doubt(f"more than {_MAX_PEEL} wrappers around one command")


def _inner(view: list[str], r: Reading) -> list[str] | None:
    """The words of the command ``view`` runs next, or None; nested lines and doubts go to ``r``."""
    name, args = view[0], view[1:]
    found = hatch([plain(w) for w in view])
    if found:
        r.hatches.append(found)
    stored = stores_code([plain(w) for w in view]) or evaluates_subscript([plain(w) for w in view])
    if stored:
        r.doubt(stored)
    if name in INERT and not found:
        r.names.extend(plain(a) for a in args if "/" in a)  # cp /bin/rm x; ./x v
        return None
    if name in _CATALOGUED and not found:  # _hatches knows every way it runs commands
        if name == "git" and _git_arguments_only(args):
            return None  # git commit -m "$(cat msg)": a computed message, not an option that runs
        if any(computed(a) for a in args):
            r.doubt(f"{name} is given a computed word, which could be an option that runs commands")
        return None
    r.name_words(args)
    if name == "git":
        return _git_alias(args, r)
    if name in SHELLS or name in ("su", "runuser", "script"):
        _shell(name, args, r)
        return None
    if name == "eval":
        words = args[1:] if args[:1] == ["--"] else args
        if any(marked(a) for a in words):
            r.doubt("eval runs a string computed when it runs")
        else:
            r.nested.append(" ".join(words))
        return None
    if name in ("source", "."):
        words = args[1:] if args[:1] == ["--"] else args
        if words:
            r.doubt(f"{name} runs the file {plain(words[0])!r} in this shell, which no reading of the line sees into")
        return None
    if name in WITH_VALUE and name != "ssh":
        return _wrapper(name, args, r)
    if name == "find":
        if any(computed(a) for a in args):
            r.doubt("find is given a computed word, which could be -exec")
        for target in _find_exec_targets(args):
            r.nested.append(" ".join('"$found"' if "{}" in w else quote(w) for w in target))
        return None
    if any(computed(a) for a in args):
        r.doubt(f"{name} may run what its arguments name, and one of them is computed when it runs")
    if name in _TRACERS:
        # Their options vary; any of the first words that is not an option may start the command
        # they run, so each is read as one (setpriv bash -c '…' reads the line bash runs).
        starts = [k for k in range(len(args)) if not args[k].startswith("-")][:_TRACER_STARTS]
        for k in starts:
            read(args[k:], r)
        if name == "ssh":  # the remote command line is the words after the host
            rest = _skip_options(args, WITH_VALUE["ssh"])[1:]
            if rest:
                r.nested.append(" ".join(plain(w) for w in rest))
    return None


def _git_alias(args: list[str], r: Reading) -> list[str] | None:
    """``git -c alias.p=push p``: the command an alias set on the line stands for. A ``!`` alias is
    a shell line (read as one); any other alias is a git command (read as the next view)."""
    aliases: dict[str, str] = {}
    k = 0
    while k < len(args) and args[k].startswith("-"):
        a = args[k]
        value = args[k + 1] if a == "-c" and k + 1 < len(args) else a[2:] if a.startswith("-c") else ""
        if value.lower().startswith("alias.") and "=" in value:
            key, _, body = value[len("alias.") :].partition("=")
            aliases[key.lower()] = body
        elif a.startswith("--config-env") and "alias." in a.lower():
            r.doubt("git --config-env sets an alias from the environment")
        k += 2 if a in ("-c", "-C", "--git-dir", "--work-tree", "--namespace") else 1
    if k >= len(args) or args[k].lower() not in aliases:
        return None
    body, rest = aliases[args[k].lower()], args[k + 1 :]
    if body.startswith("!"):
        r.nested.append(" ".join([body[1:], *(quote(w) for w in rest)]))
        return None
    return ["git", *body.split(), *rest]


def _git_arguments_only(args: list[str]) -> bool:
    """Whether every computed word of a git command comes after a literal subcommand with no
    option that runs a program (``commit``, ``log``, ``add`` …): it can only be an argument."""
    k = 0
    while k < len(args) and args[k].startswith("-"):
        k += 2 if args[k] in ("-C", "--git-dir", "--work-tree", "--namespace") else 1
    before, sub = args[: k + 1], args[k] if k < len(args) else ""
    return not any(marked(a) for a in before) and sub in _GIT_QUIET


# git subcommands none of whose options runs a program or names one to run.
_GIT_QUIET = frozenset({"add", "status", "commit", "log", "diff", "show", "tag", "checkout", "switch", "branch", "restore",
                        "reset", "stash", "mv", "rm", "init", "blame", "shortlog", "describe", "rev-parse", "ls-files",
                        "notes", "rev-list", "reflog", "check-ignore", "for-each-ref"})
# Programs whose every way of running a command or writing a file is in _hatches.hatch.
_CATALOGUED = frozenset({"git", "sed", "gsed", "awk", "gawk", "mawk", "nawk", "tar", "bsdtar", "gtar", "sort", "uniq"})
# Programs that run the command they are given after options of their own.
_TRACERS = frozenset(
    {"strace", "ltrace", "valgrind", "chrt", "prlimit", "cpulimit", "trickle", "firejail", "proxychains", "proxychains4",
     "torsocks", "catchsegv", "fakeroot", "unshare", "nsenter", "parallel", "entr", "ssh", "systemd-run", "sg",
     "gdb", "perf", "hyperfine", "setarch", "setpriv", "taskset", "renice", "linux32", "linux64", "numactl"}
)
_SHELL_FLAGS = frozenset({"--login", "--noprofile", "--norc", "--posix", "--restricted", "--verbose", "--noediting",
                          "--debugger", "--dump-strings", "--dump-po-strings", "--pretty-print", "--protected",
                          "--wordexp", "--help", "--version", "--interactive", "--no-rcs"})


def _options(args: list[str], with_value: frozenset[str], r: Reading, name: str) -> list[str] | None:
    """``args`` after leading options (clusters like ``-iu HOME`` read letter by letter); None, with a
    doubt, when a computed word sits among them (it could be any option, or several words)."""
    k = 0
    while k < len(args):
        a = args[k]
        if marked(a):
            if k and args[k - 1] != "--" and not args[k - 1].startswith("-"):
                break
            r.doubt(f"{name} is given a computed option {plain(a)!r}, so what it runs cannot be located")
            return None
        if a == "--":
            return args[k + 1 :]
        if not a.startswith("-") or a == "-":
            break
        if a.startswith("--"):
            key = a.split("=", 1)[0]
            k += 2 if key in with_value and "=" not in a else 1
            continue
        k += 1
        for j in range(1, len(a)):
            if "-" + a[j] in with_value:
                if j == len(a) - 1:
                    if k < len(args) and marked(args[k]):
                        r.doubt(f"{name} {a} is given a computed value, which may split into several words")
                        return None
                    k += 1  # the value is the next word
                break  # the value is the rest of the cluster
    return args[k:]


def _wrapper(name: str, args: list[str], r: Reading) -> list[str] | None:
    """The command a wrapper runs (``env``, ``sudo``, ``nice``, ``time``, ``xargs`` …)."""
    if name == "env":
        for k, a in enumerate(args):
            if a in ("-S", "--split-string") and k + 1 < len(args):
                r.nested.append(" ".join(plain(w) for w in args[k + 1 :]))
            elif a.startswith("--split-string=") or (a.startswith("-S") and len(a) > 2):
                r.nested.append(a.split("=", 1)[1] if a.startswith("--") else a[2:])
            elif re.fullmatch(r"-[^-S]+S.*", a) and not re.search(r"[uC]", a[1 : a.index("S")]):
                string = a[a.index("S") + 1 :]  # a cluster ending in S: env -vS'rm x', env -iS 'rm x'
                r.nested.append(string if string else " ".join(plain(w) for w in args[k + 1 :]))
    if name == "flock" and ("-c" in args or "--command" in args):
        at = args.index("-c") if "-c" in args else args.index("--command")
        if at + 1 < len(args) and marked(args[at + 1]):
            r.doubt("flock -c runs a string computed when it runs")
        r.nested.append(" ".join(plain(w) for w in args[at + 1 : at + 2]))
        return None
    if name == "nice":
        args = [a for a in args if not re.fullmatch(r"-\d+", a)]
    rest = _options(args, WITH_VALUE[name], r, name)
    if rest is None:
        return None
    if name in ("timeout", "chroot", "flock"):
        if rest and marked(rest[0]):
            r.doubt(f"{name} is given a computed word before its command")
            return None
        rest = rest[1:]
    if name == "watch":
        if "-x" not in args and "--exec" not in args:
            if any(marked(w) for w in rest):
                r.doubt("watch runs a string computed when it runs")
            r.nested.append(" ".join(plain(w) for w in rest))
            return None
    if name == "xargs":
        replace = _xargs_replacement(args)
        rest = rest or ["echo"]  # xargs runs echo when given no command
        if replace is None:  # the words it reads are appended to the command
            return [*rest, DYNAMIC + "(words xargs reads)"]
        return [(DYNAMIC + w) if replace in plain(w) else w for w in rest]
    return rest


def _xargs_replacement(args: list[str]) -> str | None:
    """The replace string of ``xargs -I R`` / ``-i`` / ``--replace[=R]``, or None."""
    for k, a in enumerate(args):
        if a == "-I" and k + 1 < len(args):
            return plain(args[k + 1])
        if a.startswith("-I") and len(a) > 2:
            return a[2:]
        if a == "-i" or a == "--replace":
            return "{}"
        if a.startswith("-i"):
            return a[2:]
        if a.startswith("--replace="):
            return a.split("=", 1)[1]
        if not a.startswith("-"):
            break
    return None


def _shell(name: str, args: list[str], r: Reading) -> None:
    """Locates the program a shell runs: a ``-c`` string (nested), stdin, or a script file."""
    if name in ("su", "runuser", "script"):
        if any(marked(a) for a in args):
            r.doubt(f"{name} is given a computed word, so what it runs cannot be located")
            return
        flag = next((k for k, a in enumerate(args) if a in ("-c", "--command")), None)
        if flag is not None and flag + 1 < len(args):
            r.nested.append(args[flag + 1])
        elif name in ("runuser", "su") and "--" in args:  # runuser -u USER -- COMMAND
            rest = args[args.index("--") + 1 :]
            r.nested.append(" ".join(quote(w) for w in rest))
        return
    with_value = WITH_VALUE["sh"]
    k, dash_c, dash_s = 0, False, False
    while k < len(args):
        a = args[k]
        if marked(a):
            r.doubt(f"{name} is given a computed word {plain(a)!r} where its options or program are")
            return
        if a in ("--", "-"):
            k += 1
            break
        if a.startswith("--"):
            key, _, value = a.partition("=")
            if key == "--command":
                dash_c = True
                if value:
                    r.nested.append(value)
                    return
                k += 1
                break
            if key in ("--rcfile", "--init-file"):
                r.doubt(f"{name} {a} runs a file first, which no reading of the line sees into")
                return
            if key in with_value:
                k += 1 if value else 2
            elif key in _SHELL_FLAGS:
                k += 1
            else:
                r.doubt(f"{name} {a} is an option this reader does not know")
                return
            continue
        if a[0] in "-+" and len(a) > 1:
            k += 1
            for ch in a[1:]:
                if ch == "c":
                    dash_c = True
                elif ch == "s":
                    dash_s = True
                elif ch in "oO":
                    if k < len(args) and marked(args[k]):
                        r.doubt(f"{name} -{ch} is given a computed option name")
                        return
                    k += 1  # -o NAME: the option's name is the next word
                elif not ch.isalpha():
                    r.doubt(f"{name} {a} is an option this reader does not know")
                    return
            continue
        break
    operands = args[k:]
    if operands and marked(operands[0]):
        r.doubt(f"{name} runs a program {plain(operands[0])!r} computed when it runs")
    elif dash_c:
        if operands:
            r.nested.append(operands[0])
    elif dash_s or not operands:
        r.reads_program = True
    else:
        r.doubt(f"{name} runs the script {operands[0]!r}, which no reading of the line sees into")
    return


def base(word: str) -> str:
    return word.rsplit("/", 1)[-1] if "/" in word else word


def _skip_options(args: list[str], with_value: frozenset[str]) -> list[str]:
    """``args`` after leading options; options in ``with_value`` take the next word."""
    k = 0
    while k < len(args):
        a = args[k]
        if a == "--":
            return args[k + 1 :]
        if not a.startswith("-") or a == "-":
            break
        k += 2 if a in with_value else 1
    return args[k:]


def quote(word: str) -> str:
    word = plain(word)
    return word if word and re.fullmatch(r"[A-Za-z0-9_./=:,+@%^-]+", word) else "'" + word.replace("'", "'\\''") + "'"


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
