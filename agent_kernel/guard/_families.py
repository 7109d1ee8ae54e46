"""families — rule names that stand for every tool with one kind of effect on files.

A rule is written with a tool's name, but what a person means by ``deny write_file(.git)`` is
"nothing changes ``.git``", whichever tool would change it. So the names below stand for a
family: a rule naming one binds every tool whose ``category`` is that family, when the call's key
is a path in the workspace (a ``PathKey``). A new tool joins a family by declaring it
(``Tool(..., category="edit", permission_key=path_key("path"))``); no rule needs rewriting.

``read``: ``read_file`` rules bind every tool that reads files (``read_file``, ``list_files``,
and ``grep`` / ``glob``, which also withhold what the rules cover from their results).
``edit``: ``write_file`` and ``edit_file`` rules bind every tool that changes files. A tool that
changes a file reads it too (``edit_file`` reports what it did not find), so deny and ask rules of
the ``read`` family bind it as well.
"""

from __future__ import annotations

#: Family → the rule names that stand for it.
FAMILIES: dict[str, frozenset[str]] = {
    "read": frozenset({"read_file"}),
    "edit": frozenset({"write_file", "edit_file"}),
}

# A tool of the first family is also bound by deny and ask rules of the others.
_ALSO_REFUSED_BY: dict[str, tuple[str, ...]] = {"edit": ("read",)}


def family_names(family: str | None) -> frozenset[str]:
    """The rule names that stand for ``family`` (empty for a tool in none)."""
    return FAMILIES.get(family or "", frozenset())


def judged_families(family: str | None, *, refusing: bool) -> tuple[str, ...]:
    """The families whose rules bind a tool of ``family``: with ``refusing`` (deny and ask rules)
    also the families its effect includes (an edit reads)."""
    if not family or family not in FAMILIES:
        return ()
    return (family, *_ALSO_REFUSED_BY.get(family, ())) if refusing else (family,)
