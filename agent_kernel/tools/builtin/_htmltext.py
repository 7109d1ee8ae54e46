"""tools.builtin.htmltext — an HTML page as readable Markdown-like text, with the standard library.

Headings, paragraphs, lists, links (made absolute), code blocks, table rows and emphasis survive;
scripts, styles, forms' machinery and other markup that is not text are dropped, and whitespace is
collapsed outside ``<pre>``. ``html.parser`` is lenient, so broken markup still gives its text.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urljoin

# Elements whose content is not text a reader sees.
_SKIPPED = frozenset({"script", "style", "noscript", "template", "svg", "math", "iframe", "object", "canvas", "select", "button", "head"})
_BLOCKS = frozenset({
    "p", "div", "section", "article", "main", "header", "footer", "nav", "aside", "blockquote", "figure", "figcaption",
    "table", "thead", "tbody", "tfoot", "tr", "ul", "ol", "dl", "dt", "dd", "form", "fieldset", "details", "summary", "hr",
    "address", "body", "html",
})
_VOID = frozenset({"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "embed", "source", "track", "wbr"})
_SPACES = re.compile(r"[ \t\r\f\v\n]+")
_LIST_ITEM = re.compile(r" +(?:- |\d+\. )")


class _Converter(HTMLParser):
    def __init__(self, base_url: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base_url = base_url
        self.out: list[str] = []
        self.title = ""
        self._skip: list[str] = []
        self._in_title = False
        self._pre = 0
        self._lists: list[list[int]] = []  # per open list: [is_ordered, next number]
        self._links: list[str | None] = []
        self._cell = False

    # -- writing -----------------------------------------------------------------------------

    def _write(self, text: str) -> None:
        self.out.append(text)

    def _break(self, blank: bool = True) -> None:
        if not blank and self.out and self.out[-1].endswith("\n"):
            return
        self.out.append("\n\n" if blank else "\n")

    # -- parsing -----------------------------------------------------------------------------

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title" and all(t == "head" for t in self._skip):  # not an SVG's title
            self._in_title = True
            return
        if tag in _SKIPPED and tag not in _VOID:
            self._skip.append(tag)
            return
        if self._skip:
            return
        attr = dict(attrs)
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            self._break()
            self._write("#" * int(tag[1]) + " ")
        elif tag == "pre":
            self._break()
            self._write("```\n")
            self._pre += 1
        elif tag == "code" and not self._pre:
            self._write("`")
        elif tag in ("strong", "b"):
            self._write("**")
        elif tag in ("em", "i"):
            self._write("*")
        elif tag in ("ul", "ol"):
            self._break(blank=not self._lists)
            self._lists.append([tag == "ol", 1])
        elif tag == "li":
            self._break(blank=False)
            depth = max(0, len(self._lists) - 1)
            ordered, number = self._lists[-1] if self._lists else (False, 1)
            self._write("  " * depth + (f"{number}. " if ordered else "- "))
            if self._lists:
                self._lists[-1][1] += 1
        elif tag == "a":
            href = (attr.get("href") or "").strip()
            target = urljoin(self.base_url, href) if href and not href.lower().startswith(("javascript:", "data:", "#")) else None
            self._links.append(target)
            if target:
                self._write("[")
        elif tag == "img":
            alt = _SPACES.sub(" ", attr.get("alt") or "").strip()
            if alt:
                self._write(f"[image: {alt}]")
        elif tag == "br":
            self._break(blank=False)
        elif tag in ("td", "th"):
            self._write(" | " if self._cell else "| ")
            self._cell = True
        elif tag == "tr":
            self._break(blank=False)
            self._cell = False
        elif tag == "hr":
            self._break()
            self._write("---")
            self._break()
        elif tag in _BLOCKS:
            self._break()

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
            return
        if self._skip:
            if tag == self._skip[-1]:
                self._skip.pop()
            return
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            self._break()
        elif tag == "pre" and self._pre:
            self._pre -= 1
            self._write("\n```")
            self._break()
        elif tag == "code" and not self._pre:
            self._write("`")
        elif tag in ("strong", "b"):
            self._write("**")
        elif tag in ("em", "i"):
            self._write("*")
        elif tag in ("ul", "ol") and self._lists:
            self._lists.pop()
            self._break(blank=not self._lists)
        elif tag == "a" and self._links:
            target = self._links.pop()
            if target:
                self._write(f"]({target})")
        elif tag == "tr":
            if self._cell:
                self._write(" |")
            self._cell = False
        elif tag in _BLOCKS:
            self._break()

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
            return
        if self._skip:
            return
        self._write(data if self._pre else _SPACES.sub(" ", data))


def _tidy(text: str) -> str:
    """Stray spaces gone (code blocks and list indents kept), at most one blank line in a row."""
    kept: list[str] = []
    fenced = False
    for line in text.split("\n"):
        if line.strip() == "```":
            fenced = not fenced
            kept.append("```")
            continue
        if not fenced:
            line = line.rstrip()
            if not _LIST_ITEM.match(line):
                line = line.lstrip(" ")
            if not line and kept and not kept[-1]:
                continue
        kept.append(line)
    return "\n".join(kept).strip()


def html_to_text(markup: str, base_url: str = "") -> str:
    """``markup`` as readable text: Markdown headings, lists, links, code blocks and emphasis.

    Args:
        markup: the HTML.
        base_url: the page's address, against which relative links are made absolute.

    Example:
        >>> html_to_text("<h1>Hi</h1><p>See <a href='/x'>this</a>.</p>", "https://e.org/a")
        '# Hi\\n\\nSee [this](https://e.org/x).'
    """
    parser = _Converter(base_url)
    parser.feed(markup)
    parser.close()
    body = _tidy("".join(parser.out))
    title = _SPACES.sub(" ", parser.title).strip()
    if title and not body.startswith(f"# {title}"):
        return f"Title: {title}\n\n{body}"
    return body
