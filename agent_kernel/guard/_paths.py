"""tools.paths — one path resolution for every tool that touches files: ``Workspace`` and ``PathKey``.

A model's tool calls are hostile input, so a path is judged by the file it names, never by how it
was spelled. ``Workspace.canonical`` turns every spelling (absolute, ``./x/../.env``,
``sub//../.env``, a trailing slash, a symbolic link inside the workspace) into one canonical path
relative to the workspace; permission rules match that (a ``PathKey``), so a rule about ``.env``
holds for every spelling of ``.env``.

Opening is race-safe: ``Workspace.open`` walks directory descriptors from the workspace root, one
component at a time, with ``O_NOFOLLOW`` on every component, so a name that another process flips
to a symbolic link between the check and the open makes the open fail rather than leave the
workspace. Links inside the workspace that point inside it still work: they are resolved on
purpose first, confinement is checked on the result, and that link-free path is what the walk
opens. Anything but a regular file or a folder (FIFOs, sockets, devices) is refused before a byte
is read, because reading a FIFO blocks forever and reading a device never ends.

Tools that touch files declare their path argument with ``path_key("path")`` as the tool's
``permission_key``; the permission layer asks it for the canonical key, so a new file tool gets
the same protection by declaring its argument, in one place.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agent_kernel.errors import ToolError

# Where the platform can open relative to a directory descriptor without following links, files
# are opened by a descriptor walk; elsewhere (Windows) by path after the confinement check.
_FD_WALK = os.open in os.supports_dir_fd and hasattr(os, "O_NOFOLLOW") and hasattr(os, "O_DIRECTORY")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# A link flipped mid-open is retried a few times (a legitimate rename may be in progress), then refused.
_RACE_RETRIES = 3


class PathKey(str):
    """A file tool's permission key: the canonical path, relative to the workspace when inside it.

    Rule patterns are normalised the same way before matching (``./.env``, ``/abs/ws/.env`` and
    ``.env/`` in a rule all mean ``.env``), and a pattern naming a folder covers what is inside it.

    Example:
        >>> PathKey("secrets/api.txt").matched_by("secrets")
        True
    """

    root: str = ""  # the workspace the key is relative to (set by ``of``)

    @classmethod
    def of(cls, value: str, root: str) -> PathKey:
        """The key ``value`` relative to the workspace ``root``."""
        key = cls(value)
        key.root = root
        return key

    def matched_by(self, pattern: str) -> bool:
        """Whether the rule pattern ``pattern`` names this path or a folder above it."""
        pat = _normal_pattern(pattern, self.root)
        text = str(self)
        if fnmatch.fnmatchcase(text, pat):
            return True
        # A rule naming a folder covers everything below it (deny write_file(.git) covers .git/config).
        parent = os.path.dirname(text)
        while parent and parent not in ("/", "."):
            if fnmatch.fnmatchcase(parent, pat):
                return True
            parent = os.path.dirname(parent)
        return False


def _normal_pattern(pattern: str, root: str) -> str:
    pat = pattern.strip()
    if not pat:
        return pat
    pat = os.path.normpath(pat)
    if root and os.path.isabs(pat):
        if not _under(pat, root) and not any(c in pat for c in "*?["):
            pat = os.path.realpath(pat)  # the workspace written through a link (/tmp → /private/tmp)
        if _under(pat, root):
            rel = os.path.relpath(pat, root)
            pat = "." if rel == "." else Path(rel).as_posix()
    return pat


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


class PathArgument:
    """A file tool's ``permission_key``: names the argument holding the path.

    Called with the arguments alone (``Tool.key``) it gives the path normalised as written; the
    permission layer calls ``canonical`` with the run's working directory to get a ``PathKey``.
    """

    __slots__ = ("default", "name")

    def __init__(self, name: str, default: str = "") -> None:
        self.name = name
        self.default = default

    def __call__(self, arguments: dict[str, Any]) -> str:
        """The path as written, normalised (``./a/../b`` → ``b``)."""
        path = str(arguments.get(self.name, self.default) or self.default)
        return os.path.normpath(path) if path else path

    def canonical(self, arguments: dict[str, Any], working_dir: str | os.PathLike[str] | None) -> PathKey:
        """The canonical path of the call's path argument (see ``Workspace.canonical``)."""
        path = str(arguments.get(self.name, self.default) or self.default)
        return Workspace(working_dir).canonical(path)

    def identity(self, arguments: dict[str, Any], working_dir: str | os.PathLike[str] | None) -> FileIdentity:
        """Which file the call's path argument leads to now (see ``Workspace.identity``)."""
        path = str(arguments.get(self.name, self.default) or self.default)
        return Workspace(working_dir).identity(path)


def path_key(name: str = "path", default: str = "") -> PathArgument:
    """The ``permission_key`` for a tool whose argument ``name`` is a path in the workspace."""
    return PathArgument(name, default)


class FileIdentity(dict):
    """The file an approval card showed: ``{"path": canonical, "device": n, "inode": n}``, or
    ``{"path": canonical, "absent": True}`` for a file that did not exist yet (a plain dict, so it
    goes into the ``approval_required`` event as it is)."""


class FileChanged(ToolError):
    """The file a call opens is not the one its approval showed (a link re-pointed, a file replaced)."""


@dataclass(frozen=True, slots=True)
class Resolved:
    """A path inside the workspace: ``rel`` (canonical, POSIX, ``.`` for the root) and ``path`` (absolute)."""

    rel: str
    path: Path


class PathRules(Protocol):
    """What a file tool asks the permission rules when it opens or lists a path (``Permissions``)."""

    def refuses(self, tool_name: str, key: str, *, asking: bool = False, family: str | None = None) -> str | None:
        """The rule refusing ``tool_name(key)`` or None; with ``asking``, ask rules refuse too;
        ``family``: the tool's family, whose rules bind it (``guard._families``)."""
        ...


def path_rules(ctx: Any) -> PathRules | None:
    """The permission rules of the run a tool call belongs to, or None outside a run.

    Found by duck typing (``ctx.run.permissions.permissions``) because the tools layer sits below
    the permission layer; a custom gate without rules gives None.
    """
    gate = getattr(getattr(ctx, "run", None), "permissions", None)
    rules = getattr(gate, "permissions", None)
    rules = rules if callable(getattr(rules, "refuses", None)) else None
    own: Any = getattr(gate, "own", None)  # a sub-agent's own rules (``NestedGate``) hold on open too
    if rules is not None and own is not None and callable(getattr(own, "refuses", None)) and own is not rules:
        return _BothRules(own, rules)
    return rules


class _BothRules:
    """A sub-agent's rules and its parent's: either refusing refuses."""

    def __init__(self, own: PathRules, parent: PathRules) -> None:
        self._own, self._parent = own, parent

    def refuses(self, tool_name: str, key: str, *, asking: bool = False, family: str | None = None) -> str | None:
        """The first rule of either that refuses ``tool_name(key)``, or None."""
        return (self._own.refuses(tool_name, key, asking=asking, family=family)
                or self._parent.refuses(tool_name, key, asking=asking, family=family))


def _refuse_other_names(fd: int, rel: str) -> None:
    """Closes ``fd`` and refuses when the file has other names (hard links): a write rule about one
    of them (``deny write_file(.git)``) cannot be checked from this name, so the write fails closed."""
    links = os.fstat(fd).st_nlink
    if links > 1:
        os.close(fd)
        raise ToolError(
            f"Refused: {rel!r} has {links} names (hard links), and the permission rules can only be checked "
            "against this one; writing it would change the file under its other names too. Write it by the "
            "name the rules know it by, or ask the user to remove the extra links (ls -li shows them)."
        )


class Workspace:
    """The folder file tools are confined to, and the only way they resolve and open paths.

    Args:
        root: the working directory (None: the process's current directory).
    """

    __slots__ = ("_prefix", "root")

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(os.path.realpath(os.fspath(root) if root is not None else os.getcwd()))
        self._prefix = str(self.root).rstrip(os.sep) + os.sep

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    # -- naming ------------------------------------------------------------------------------

    def _inside(self, absolute: str) -> bool:
        return absolute == str(self.root) or absolute.startswith(self._prefix)

    def _rel(self, absolute: str) -> str:
        if absolute == str(self.root):
            return "."
        return Path(absolute[len(self._prefix) :]).as_posix()

    def canonical(self, path: str) -> PathKey:
        """The one name of the file ``path`` leads to: relative to the root when inside it.

        Links are followed, ``..``, ``.``, repeated and trailing slashes removed, so every spelling
        of a file gives the same key. A path leading outside gives its absolute real path (the
        tools refuse it; rules may still name it).
        """
        text = str(path).strip()
        if "\0" in text:  # no file has this name; the tools refuse it, so the text is the key
            return PathKey.of(text, str(self.root))
        given = os.path.expanduser(text) if text else "."
        try:
            absolute = _realpath(os.path.join(self.root, given))
        except ToolError:  # links changing under us: the tools will refuse; judge the spelling
            absolute = os.path.normpath(os.path.join(self.root, given))
        return PathKey.of(self._rel(absolute) if self._inside(absolute) else absolute, str(self.root))

    def identity(self, path: str) -> FileIdentity:
        """The file ``path`` leads to now: its canonical path and its device and inode, or absent.

        An approval card records this; the write then opens that same file or none
        (``open(..., expect=...)``).
        """
        key = self.canonical(path)
        absolute = key if os.path.isabs(key) else os.path.join(self.root, key)
        try:
            st = os.stat(absolute, follow_symlinks=False)
        except OSError:
            return FileIdentity(path=str(key), absent=True)
        return FileIdentity(path=str(key), device=st.st_dev, inode=st.st_ino)

    def resolve(self, path: str) -> Resolved:
        """The canonical path of ``path`` inside the workspace.

        Raises:
            ToolError: it is empty or leads outside the workspace (by ``..``, an absolute path or
                a link), with a message saying which.
        """
        root = self.root
        if not path or not str(path).strip():
            raise ToolError("The path is empty; give a path relative to the working directory, e.g. 'notes.md'.")
        text = str(path).strip()
        if "\0" in text:
            raise ToolError(f"Refused: {text!r} contains a NUL character, which no file name can hold.")
        given = os.path.expanduser(text)
        lexical = os.path.normpath(os.path.join(root, given))
        if not self._inside(lexical):
            kind = "an absolute path outside" if os.path.isabs(given) else "outside"
            raise ToolError(
                f"Refused: {text!r} is {kind} the working directory {root}. File tools only reach files "
                f"under it; use a path relative to {root}."
            )
        real = _realpath(os.path.join(root, given))
        if not self._inside(real):
            raise ToolError(
                f"Refused: {text!r} goes through a symbolic link to {real}, outside the working directory "
                f"{root}. File tools do not follow links out of it."
            )
        return Resolved(self._rel(real), Path(real))

    def display(self, rel_or_path: str | Path) -> str:
        """A path as the model should write it: relative to the root."""
        if isinstance(rel_or_path, Path):
            absolute = str(rel_or_path)
            return self._rel(absolute) if self._inside(absolute) else absolute
        return rel_or_path

    # -- opening -----------------------------------------------------------------------------

    def open_dir(self, rel: str) -> int:
        """A descriptor for the folder ``rel``, reached without following any link.

        Raises:
            ToolError: a component is not a folder, is missing, or became a link mid-walk.
        """
        try:
            return self._walk(_parts(rel), create=False, shown=rel)
        except _Raced:
            raise ToolError(f"Refused: a folder on the way to {rel!r} became a symbolic link while it was being opened.") from None

    def _walk(self, parts: list[str], *, create: bool, shown: str) -> int:
        """Opens folder after folder from the root, following no link; raises ``_Raced`` on one."""
        fd = os.open(self.root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        try:
            for part in parts:
                try:
                    nxt = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    try:
                        os.mkdir(part, 0o777, dir_fd=fd)
                    except FileExistsError:
                        pass  # made by someone else meanwhile: the open below judges what it is
                    nxt = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd = nxt
            return fd
        except OSError as exc:
            os.close(fd)
            if exc.errno == errno.ELOOP:
                raise _Raced() from None
            raise _open_error(exc, shown) from None

    def open(
        self, path: str, *, write: bool = False, guard: Callable[[str], None] | None = None, expect: FileIdentity | None = None,
    ) -> tuple[int, Resolved, bool]:
        """Opens the regular file ``path`` (for reading, or for writing: created, not truncated).

        ``path`` is resolved and confined, ``guard`` (if any) is called with its canonical path
        (a file tool re-checks the permission rules on what it really opens), and the file is
        opened by a descriptor walk that follows no link, so a name swapped meanwhile makes the
        open fail instead of escaping. For writing, missing folders are created on the way.

        With ``expect`` (the file an approval showed, ``identity``), only that file is opened: the
        same canonical path, and the same device and inode, or still absent (then it is created
        only if nothing appeared there meanwhile); anything else raises ``FileChanged`` before a
        byte is written.

        Returns:
            ``(fd, resolved, created)``: the open descriptor (the caller closes it), the canonical
            path, and whether the file was created.

        Raises:
            ToolError: outside the workspace, missing (reading), a folder, a FIFO, socket or
                device, refused by ``guard``, or swapped for a link on every retry.
        """
        for attempt in range(_RACE_RETRIES):
            resolved = self.resolve(path)
            if guard is not None:
                guard(resolved.rel)
            if expect is not None and expect.get("path") != resolved.rel:
                raise FileChanged(_changed(path, expect, f"it now leads to {resolved.rel!r}"))
            try:
                fd, created = self._open_file(resolved, write, expect)
            except _Raced:
                if attempt + 1 == _RACE_RETRIES:
                    raise ToolError(
                        f"Refused: {path!r} kept turning into a symbolic link while it was being opened (something "
                        "else is changing it). File tools never follow a link swapped in mid-open; try again later."
                    ) from None
                continue
            if write and guard is not None and not created:
                _refuse_other_names(fd, resolved.rel)
            return fd, resolved, created
        raise AssertionError("unreachable")  # pragma: no cover

    def _open_file(self, resolved: Resolved, write: bool, expect: FileIdentity | None = None) -> tuple[int, bool]:
        if resolved.rel == ".":
            raise ToolError(f"{resolved.rel!r} is a directory, not a file; use list_files to see what it contains.")
        if not _FD_WALK:  # pragma: no cover - platforms without dir_fd (Windows)
            return _open_by_path(resolved.path, write)
        parts = _parts(resolved.rel)
        dir_fd = self._walk(parts[:-1], create=write, shown=resolved.rel)  # _Raced: the caller retries
        name = parts[-1]
        created = False
        try:
            flags = os.O_NOFOLLOW | _NONBLOCK | _CLOEXEC
            if write and expect is not None:
                if expect.get("absent"):
                    try:  # only a file that is still absent is created; one that appeared is not the one shown
                        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | flags, 0o666, dir_fd=dir_fd)
                    except FileExistsError:
                        raise FileChanged(_changed(resolved.rel, expect, "a file appeared there since")) from None
                    created = True
                else:
                    try:  # never created: the file shown existed
                        fd = os.open(name, os.O_WRONLY | flags, dir_fd=dir_fd)
                    except FileNotFoundError:
                        raise FileChanged(_changed(resolved.rel, expect, "it was removed since")) from None
            elif write:
                try:
                    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | flags, 0o666, dir_fd=dir_fd)
                    created = True
                except FileExistsError:
                    fd = os.open(name, os.O_WRONLY | flags, dir_fd=dir_fd)
            else:
                fd = os.open(name, os.O_RDONLY | flags, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _Raced() from None
            if exc.errno == errno.EISDIR:
                raise ToolError(f"{resolved.rel!r} is a directory, not a file; use list_files to see what it contains.") from None
            if exc.errno == errno.ENXIO:  # a FIFO with no reader, or a socket
                raise ToolError(_special(resolved.rel, "a FIFO or socket")) from None
            raise _open_error(exc, resolved.rel) from None
        finally:
            os.close(dir_fd)
        try:
            st = os.fstat(fd)
            mode = st.st_mode
            if expect is not None and not expect.get("absent") and (st.st_dev, st.st_ino) != (expect.get("device"), expect.get("inode")):
                raise FileChanged(_changed(resolved.rel, expect, "another file is there now"))
            if stat.S_ISDIR(mode):
                raise ToolError(f"{resolved.rel!r} is a directory, not a file; use list_files to see what it contains.")
            if not stat.S_ISREG(mode):
                raise ToolError(_special(resolved.rel, _kind(mode)))
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd, created

    def walk(self, rel: str) -> Iterator[tuple[str, list[str], list[str], int | None]]:
        """Like ``os.walk`` from the folder ``rel``, by descriptors: never enters a linked folder.

        Yields ``(folder_rel, dirs, files, dir_fd)``; prune ``dirs`` in place to skip folders.
        ``dir_fd`` is the folder's descriptor, valid until the next step (None where the platform
        has no ``fwalk``): ``open_at`` opens a file in it. Names in ``files`` include links; open
        those with ``open``, which judges where they lead.
        """
        base_fd = self.open_dir(rel)
        try:
            if not hasattr(os, "fwalk"):  # pragma: no cover
                for folder, dirs, files in os.walk(self.root / rel):
                    yield self._rel(str(folder)), dirs, files, None
                return
            for folder, dirs, files, dir_fd in os.fwalk(".", dir_fd=base_fd, follow_symlinks=False):
                # fwalk lists a link to a folder among ``dirs`` without entering it; drop it.
                dirs[:] = [d for d in dirs if not _is_link(d, dir_fd)]
                sub = os.path.normpath(os.path.join(rel, folder))
                yield ("." if sub == "." else Path(sub).as_posix()), dirs, files, dir_fd
        finally:
            os.close(base_fd)

    def open_at(self, dir_fd: int | None, name: str, rel: str) -> int:
        """Opens the regular file ``name`` in a folder ``walk`` reached, following no link.

        ``rel`` is its canonical path (for messages, and for opening where ``dir_fd`` is None).

        Raises:
            ToolError: it is a link (swapped in since the walk listed it), not a regular file, or gone.
        """
        if dir_fd is None:  # pragma: no cover - platforms without fwalk
            return self.open(rel)[0]
        try:
            fd = os.open(name, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ToolError(f"Refused: {rel!r} became a symbolic link while it was being opened.") from None
            raise _open_error(exc, rel) from None
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                raise ToolError(_special(rel, _kind(mode)))
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd


class _Raced(Exception):
    """A component turned into a link between resolving and opening."""


def _realpath(path: str) -> str:
    """``os.path.realpath``, retried when a link changes while it is being read (EINVAL, ENOENT).

    Raises:
        ToolError: the path kept changing.
    """
    for _ in range(_RACE_RETRIES):
        try:
            return os.path.realpath(path)
        except OSError:
            continue
    raise ToolError(f"Refused: {path!r} kept changing (links replaced) while it was being resolved; try again later.")


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return True  # gone or unreadable: not a folder to enter


def _parts(rel: str) -> list[str]:
    return [p for p in Path(rel).parts if p not in (".", "")]


def _changed(path: str, shown: FileIdentity, what: str) -> str:
    return (
        f"Refused: the approval was for {shown.get('path')!r} as it was when it was shown, but {what}; nothing "
        f"was written to {path!r}. Call the tool again to be asked about the file as it is now."
    )


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _special(rel: str, kind: str) -> str:
    return (
        f"Refused: {rel!r} is {kind}, not a regular file; file tools read and write regular files only "
        "(reading a pipe or device could block or never end)."
    )


def _open_error(exc: OSError, shown: str) -> ToolError:
    if exc.errno == errno.ENOTDIR:
        return ToolError(f"{shown!r}: a part of this path is a file, not a folder.")
    if exc.errno == errno.ENOENT:
        return ToolError(f"No such file or folder: {shown!r}. Use list_files or glob to find it.")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return ToolError(f"Permission denied by the operating system for {shown!r}.")
    return ToolError(f"Could not open {shown!r}: {exc.strerror or exc}.")


def _open_by_path(path: Path, write: bool) -> tuple[int, bool]:  # pragma: no cover - Windows
    created = not path.exists()
    if write:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o666)
    else:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ToolError(_special(str(path), "not a regular file"))
    return fd, created
