"""hatches — escape hatches: options that make a program an allow rule names run other commands.

``bash(git *)`` is meant to allow git, not whatever ``git -c alias.x='!cmd' x`` runs. This module
knows, program by program, the options and arguments that turn an allowed command into a way to
run arbitrary commands or write files (``git -c``, ``find -exec``, ``awk 'BEGIN{system(…)}'``,
``sed 's/…/…/e'``, ``tar --to-command``, ``ssh -o ProxyCommand``, ``python -c`` …). The command
matcher (``agent_kernel.guard._shell``) asks ``hatch(words)`` about every spelling of every command,
and a command with a hatch is never allowed by a wildcard rule: it asks.

The list is a catalogue of known cases, not a proof; ``docs/security.md`` says what it covers.
"""

from __future__ import annotations

import re

# Programs that never run a word they are given as a command, whatever the word: a computed word
# among their arguments cannot make them run something else. Everything not listed here, and
# any listed program an escape hatch was found in, may run what its arguments name.
INERT = frozenset(
    {"echo", "printf", "cat", "tac", "ls", "dir", "head", "tail", "wc", "cut", "tr", "uniq", "paste", "join", "nl", "fold",
     "comm", "rev", "basename", "dirname", "pwd", "cd", "true", "false", ":", "test", "[", "[[", "]]", "mkdir", "touch",
     "cp", "mv", "ln", "chmod", "stat", "date", "sleep", "seq", "grep", "egrep", "fgrep", "diff", "cmp", "readlink",
     "realpath", "whoami", "id", "uname", "du", "df", "tee", "od", "xxd", "base64", "md5sum", "sha1sum", "sha256sum",
     "printenv", "exit", "return", "shift", "wait", "kill", "read", "unset", "break", "continue", "rm", "rmdir", "file",
     "jq", "column", "expr", "mktemp", "sync", "ps", "tree", "yes", "nproc", "locale", "dirs", "popd",
     "pushd", "umask", "getopts", "let"}
)
# Variables whose value a shell runs later: assigning one stores code (``BASH_ENV=x bash s``).
CODE_VARIABLES = frozenset(
    {"BASH_ENV", "ENV", "PROMPT_COMMAND", "PS0", "PS1", "PS2", "PS3", "PS4", "SHELLOPTS", "BASHOPTS",
     "BASH_LOADABLES_PATH", "EXECIGNORE", "PATH"}
)


def is_code_variable(name: str) -> bool:
    """Whether assigning ``name`` stores code or changes which program a name runs."""
    return name in CODE_VARIABLES or name.startswith("BASH_FUNC_")
# Options that take the next word as their value, program by program (``nice -n 5 rm``).
WITH_VALUE: dict[str, frozenset[str]] = {
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "sudo": frozenset({"-u", "--user", "-g", "--group", "-h", "--host", "-p", "--prompt", "-C", "--close-from", "-D",
                       "--chdir", "-r", "--role", "-t", "--type", "-U", "--other-user", "-T", "--command-timeout", "-R",
                       "--chroot"}),
    "doas": frozenset({"-u", "-C"}),
    "stdbuf": frozenset({"-i", "--input", "-o", "--output", "-e", "--error"}),
    "xargs": frozenset({"-I", "-L", "-n", "-P", "-s", "-d", "-E", "-a", "--arg-file", "--delimiter", "--max-args",
                        "--max-procs", "--max-chars", "--max-lines", "--process-slot-var"}),
    "exec": frozenset({"-a"}),
    "ionice": frozenset({"-c", "-n", "-p", "-P", "-u", "--class", "--classdata"}),
    "watch": frozenset({"-n", "--interval", "-q", "--equexit"}),
    "flock": frozenset({"-w", "--timeout", "-E", "--conflict-exit-code"}),
    "chroot": frozenset({"--userspec", "--groups"}),
    "time": frozenset({"-o", "--output", "-f", "--format"}),
    "setsid": frozenset(),
    "command": frozenset(),
    "builtin": frozenset(),
    "nohup": frozenset(),
    "unbuffer": frozenset(),
    "busybox": frozenset(),
    "caffeinate": frozenset(),
    "chronic": frozenset(),
    "ssh": frozenset({"-b", "-c", "-D", "-E", "-e", "-F", "-I", "-i", "-J", "-L", "-l", "-m", "-O", "-o", "-p", "-Q", "-R",
                      "-S", "-W", "-w", "-B", "-P"}),
    # The shells' own: -o/-O name an option, --rcfile/--init-file a file read first.
    "sh": frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"}),
}


# Builtins that take variable names and evaluate an array subscript in one as arithmetic, which
# runs the command substitutions in it even when the word was quoted: read 'a[$(rm x)]' <<< 1.
_NAME_TAKERS = frozenset({"read", "mapfile", "readarray", "getopts", "wait", "unset", "let", "test", "[", "declare",
                          "typeset", "local", "export", "readonly"})
#: A subscript holding an expansion or a substitution: bash expands it when it evaluates the subscript.
EXPANDING_SUBSCRIPT = re.compile(r"\[[^\]]*[$`]")


def evaluates_subscript(view: list[str]) -> str | None:
    """Why this builtin may run a command hidden in an array subscript among its words, or None.

    The subscript of a name given to ``read``, ``printf -v``, ``test -v``, ``let`` … is expanded and
    evaluated when the builtin assigns or tests it, quotes or not; a subscript holding ``$`` or a
    backtick may run anything (``printf -v 'a[$(r\\m x)]' 1``).
    """
    name, args = view[0], view[1:]
    if name == "compgen" and any(("$" in a or "`" in a) for a in args):
        return "compgen expands its word list (-W), which runs the commands in it"
    if name == "printf":
        words = [args[k + 1] for k, a in enumerate(args[:-1]) if a == "-v"] + [a[2:] for a in args if a.startswith("-v") and len(a) > 2]
    elif name in _NAME_TAKERS:
        words = args
    else:
        return None
    for word in words:
        if EXPANDING_SUBSCRIPT.search(word):
            return f"{name} evaluates the array subscript in {word!r}, which runs the commands in it"
    return None


def stores_code(view: list[str]) -> str | None:
    """Why this builtin makes later commands of the shell run something else, or None.

    ``trap 'rm x' EXIT``, ``alias ls=rm``, ``hash -p /bin/rm ls``, ``enable -f lib.so rm``: the line
    that runs the code is written later, where no reading of it sees the name.
    """
    name, args = view[0], view[1:]
    if name == "trap" and any(a not in ("-l", "-p", "--") for a in args):
        return "trap stores code the shell runs later"
    if name == "alias" and args:
        return "alias binds a name to a command for later lines"
    if name == "hash" and any(a.startswith("-") and "p" in a for a in args):
        return "hash -p binds a name to a program for later commands"
    if name == "enable" and args:
        return "enable loads or switches builtins, so a later name may run something else"
    if name in ("declare", "typeset", "export", "readonly", "local"):
        for a in args:
            if "=" in a and is_code_variable(a.split("=", 1)[0]):
                return f"{name} sets {a.split('=', 1)[0]}, which the shell runs or searches later"
        if any(a.startswith("-") and "f" in a for a in args):
            return f"{name} -f exports or changes functions"
    return None

_INTERPRETERS = frozenset(
    {"python", "python2", "python3", "pypy", "pypy3", "perl", "ruby", "node", "nodejs", "deno", "bun", "php", "lua", "luajit",
     "Rscript", "tclsh", "wish", "osascript", "jshell", "julia", "pwsh", "powershell", "guile", "racket", "irb"}
)

_GIT_GLOBAL_WITH_VALUE = frozenset({"-C", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--list-cmds"})
_GIT_RISKY_CONFIG = (
    "alias.", "pager", "sshcommand", "editor", "fsmonitor", "hookspath", "gitproxy", "askpass", "external", "filter.",
    "credential", "include", "program", "driver", "textconv", "command", "proxy", "hook", "helper", "exec", "tool.",
)
_GIT_RISKY_ARGS = ("--upload-pack", "--receive-pack", "--exec", "--extcmd", "--open-files-in-pager", "--config", "--template",
                   "--sendmail-cmd", "--smtp-server", "--to-cmd", "--cc-cmd", "--header-cmd", "--access-hook")
_GIT_WRITING_ARGS = ("--output", "--output-directory")


def _long(a: str, *options: str) -> bool:
    """Whether ``a`` is one of the long ``options`` as GNU programs and git read them: they take any
    unambiguous prefix of a long option (``--upload-pa`` is ``--upload-pack``, ``sed --in-pl`` is
    ``--in-place``), so a prefix counts as the option."""
    if a.startswith(options):
        return True
    key = a.split("=", 1)[0]
    return key.startswith("--") and len(key) > 2 and any(o.startswith(key) for o in options)
_TAR_RISKY = ("--to-command", "--checkpoint-action", "--use-compress-program", "--info-script", "--new-volume-script",
              "--rsh-command", "--rmt-command", "--index-file")
_SHELL_ESCAPE_PROGRAMS = frozenset(
    {"less", "more", "most", "man", "vi", "vim", "nvim", "view", "vimdiff", "ex", "ed", "emacs", "nano", "pico", "mutt",
     "ftp", "gdb", "lldb", "tmux", "screen", "expect", "crontab", "at", "batch", "systemd-run", "strace", "ltrace"}
)


def hatch(view: list[str]) -> str | None:
    """Why this command must always ask although a prefix rule names it, or None."""
    name, args = view[0], view[1:]
    joined = " ".join(args)
    if name == "git":
        return _git_hatch(args)
    if name == "find":
        for a in args:
            if a in ("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"):
                return f"find {a} runs commands or changes files"
        return None
    if name in ("awk", "gawk", "mawk", "nawk"):
        if any(re.match(r"-[fEil]", a) or _long(a, "--file", "--exec", "--include", "--load") for a in args):
            return f"{name} runs a program from a file"
        # system(), a pipe to or from a command (not ||), print/printf into a file, an extension,
        # a function called by a name held in a variable (@f(), which may be system).
        if re.search(r"system\s*\(|(?<!\|)\|(?!\|)|\bprintf?\b[^;{}\n]*>|@", joined):  # @f(): gawk's indirect call, @load
            return f"{name} can run commands (system(), pipes) or write files"
        return None
    if name in ("sed", "gsed"):
        if any(_long(a, "--in-place") or (a.startswith("-") and not a.startswith("--") and "i" in a[1:]) for a in args):
            return f"{name} -i writes files"
        return _sed_hatch(args)
    if name == "sort":
        for a in args:
            if _long(a, "--output", "--compress-program") or (a.startswith("-") and not a.startswith("--") and "o" in a[1:]):
                return f"sort {a} writes a file or runs a program"
        return None
    if name == "uniq" and len([a for a in args if not a.startswith("-") or a == "-"]) >= 2:
        return "uniq writes its output into the file named second"
    if name in ("tar", "bsdtar", "gtar"):
        risky = next((a for a in args if _long(a, *_TAR_RISKY) or a in ("-I", "-F")), None)
        if risky is not None:
            return f"tar {risky} runs a command"
        return None
    if name == "rsync":
        for a in args:
            if _long(a, "--rsh", "--rsync-path") or (a.startswith("-") and not a.startswith("--") and "e" in a[1:]):
                return f"rsync {a} runs a command"
        return None
    if name in ("ssh", "scp", "sftp", "sshfs"):
        for k, a in enumerate(args):
            if a in ("-F", "-S", "-D") or a.startswith(("-F", "-S")) and len(a) > 2:
                return f"{name} {a} names a program or configuration that can run commands"
            option = args[k + 1] if a == "-o" and k + 1 < len(args) else a[2:] if a.startswith("-o") else ""
            if re.search(r"command|proxy|permitlocal|include|knownhosts", option, re.IGNORECASE):
                return f"{name} -o {option} runs a local command"
        return None
    if name in _SHELL_ESCAPE_PROGRAMS:
        return f"{name} can start a shell or run commands of its own"
    if name in _INTERPRETERS or re.fullmatch(r"python\d(\.\d+)?|perl\d?|ruby\d(\.\d+)?|php\d(\.\d+)?", name):
        for a in args:  # the interpreter's own options come before the script or module
            if not a.startswith("-") or a in ("-m", "--"):
                break
            if a in ("-c", "-e", "-E", "-r", "--eval", "--exec", "-x", "--command", "-p", "--print") or re.fullmatch(r"-[A-Za-z]*[ce]", a):
                return f"{name} runs inline code"
        return None
    if name in ("zip",) and any(a in ("-T", "-TT") or _long(a, "--unzip-command") for a in args):
        return "zip -TT runs a command"
    if name in ("tcpdump",) and any(a in ("-z",) for a in args):
        return "tcpdump -z runs a command"
    if name in ("make", "gmake") and any(a.startswith("-E") or _long(a, "--eval") for a in args):
        return f"{name} --eval runs inline rules"
    if name in ("source", ".") and args:
        return f"{name} runs a script in the shell"
    if name in ("alias", "function", "trap", "enable", "declare", "typeset", "export", "set", "shopt", "unset", "readonly",
                "local", "hash", "complete", "compgen", "bind", "mapfile", "readarray"):
        return f"{name} changes how later commands of the shell run"
    if name in ("git-upload-pack", "git-receive-pack", "git-shell"):
        return f"{name} runs git's transport commands"
    return None


def _git_hatch(args: list[str]) -> str | None:
    k = 0
    while k < len(args) and args[k].startswith("-"):
        a = args[k]
        if a.startswith(("-c", "--config-env", "--exec-path")):
            return f"git {a} sets configuration that can run commands"
        k += 2 if a in _GIT_GLOBAL_WITH_VALUE else 1
    sub, rest = (args[k], args[k + 1 :]) if k < len(args) else ("", [])
    for a in rest:
        if _long(a, *_GIT_RISKY_ARGS):
            return f"git {sub} {a} runs a command"
    if sub in ("clone", "ls-remote") and any(a.startswith("-u") for a in rest):
        return f"git {sub} -u sets the upload-pack command"
    if sub == "clone" and any(a.startswith("-c") for a in rest):
        return "git clone -c sets configuration that can run commands"
    if sub in ("rebase", "difftool") and any(a.startswith("-x") for a in rest):
        return f"git {sub} -x runs a command"
    if sub == "config":
        lowered = [a.lower() for a in rest]
        if any(a in ("-e", "--edit") for a in lowered) or any(any(k in a for k in _GIT_RISKY_CONFIG) for a in lowered):
            return "git config of an alias, pager, editor, hook or command runs commands later"
    if sub in ("filter-branch", "daemon", "instaweb", "send-email") or (sub, rest[:1]) in (("bisect", ["run"]), ("submodule", ["foreach"]), ("submodule--helper", ["foreach"])):
        return f"git {sub} runs commands of its own"
    for a in rest:  # options that write a file of the caller's choosing (.git/config, a hook)
        if _long(a, *_GIT_WRITING_ARGS) or (sub in ("format-patch", "archive") and a.startswith("-o")):
            return f"git {sub} {a} writes a file"
    if sub == "bundle" and rest[:1] == ["create"]:
        return "git bundle create writes a file"
    if sub == "checkout-index" and any(_long(a, "--prefix") for a in rest):
        return "git checkout-index --prefix writes files where it is told (.git/hooks)"
    if sub in ("grep",) and any(a.startswith("-O") for a in rest):
        return "git grep -O opens a pager"
    return None


def _sed_hatch(args: list[str]) -> str | None:
    scripts: list[str] = []
    k, first = 0, None
    while k < len(args):
        a = args[k]
        if a in ("-e", "--expression") and k + 1 < len(args):
            scripts.append(args[k + 1])
            k += 2
            continue
        if a.startswith("--expression="):
            scripts.append(a.split("=", 1)[1])
        elif a in ("-f", "--file") or a.startswith(("--file=", "-f")):
            return "sed runs a script from a file"
        elif a.startswith("-") and not a.startswith("--") and "e" in a[1:] and a[1:].replace("e", "").isalpha() and a[-1] == "e":
            if k + 1 < len(args):
                scripts.append(args[k + 1])
                k += 2
                continue
        elif not a.startswith("-") and first is None and not scripts:
            first = a
        k += 1
    if first is not None:
        scripts.append(first)
    for script in scripts:
        if _sed_script_runs(script):
            return "sed's e command or w flag runs a command or writes a file"
    return None


def _sed_script_runs(script: str) -> bool:
    """Whether a sed script uses ``e``, ``w``/``W`` or the ``s///e``/``s///w`` flags (unreadable: yes)."""
    i, n = 0, len(script)
    while i < n:
        c = script[i]
        if c in " \t\n;{}!":
            i += 1
            continue
        if c.isdigit() or c in "$,~+":
            i += 1
            continue
        if c == "/" or c == "\\":
            delim = "/" if c == "/" else script[i + 1 : i + 2]
            j = i + (1 if c == "/" else 2)
            while j < n and script[j] != delim:
                j += 2 if script[j] == "\\" else 1
            i = j + 1
            continue
        if c in "sy":
            if i + 1 >= n:
                return True
            delim = script[i + 1]
            j, parts = i + 2, 0
            while j < n and parts < 2:
                if script[j] == "\\":
                    j += 2
                    continue
                if script[j] == delim:
                    parts += 1
                j += 1
            if parts < 2:
                return True
            flags_end = j
            while flags_end < n and script[flags_end] not in ";\n}":
                flags_end += 1
            if c == "s" and re.search(r"[ewW]", script[j:flags_end]):
                return True  # s///e runs the pattern space; s///w writes a file
            i = flags_end
            continue
        if c in "ewW":
            return True
        if c in "aicrR:btTlLqQv":  # commands whose argument runs to the end of the line
            j = script.find("\n", i)
            if c in ":btTlqQLv":
                m = re.match(r"[^;\n}]*", script[i + 1 :])
                i = i + 1 + (m.end() if m else 0)
                continue
            i = n if j < 0 else j
            continue
        if c in "=dDgGhHnNpPxz#":
            if c == "#":
                j = script.find("\n", i)
                i = n if j < 0 else j
                continue
            i += 1
            continue
        return True  # something this reader does not know: assume the worst
    return False
