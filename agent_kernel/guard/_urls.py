"""guard.urls — one reading of a URL for every check that judges it: ``UrlKey`` and the address rule.

A model's tool calls are hostile input, so a URL is judged by what it fetches, never by how it was
spelled. ``url_key`` reads a URL with the parser the request itself uses (httpx) and gives one
canonical key: the scheme, the host in lower case ASCII (IDN as punycode, no trailing dot, an IPv4
address in dotted form however it was written), a port only when it is not the scheme's default,
and the path and query. ``web_fetch(...)`` rules match that key, so a rule about ``evil.com``
holds for ``EVIL.com.``, ``evil.com:8443`` and ``xn--…`` alike.

A URL it cannot read exactly (no host, another scheme, user information such as
``https://evil@good.com``, a backslash, spaces or control characters that parsers disagree
about) gives an inexact key: it matches every deny and ask rule and no allow rule.

``refused_address`` says why an address must not be reached by default: anything that is not
globally routable (loopback, private ranges, link-local including the cloud metadata address
169.254.169.254, carrier-grade NAT, unique-local IPv6) or multicast, also when an IPv6 address
carries one of those IPv4 addresses inside it.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
import socket
from typing import Any

import httpx
import idna

_SCHEMES = {"http": 80, "https": 443}
# Characters parsers disagree about (a backslash is "/" to a browser, userinfo to others).
_AMBIGUOUS = re.compile(r"[\s\\\x00-\x1f\x7f]")
_GLOB = re.compile(r"[*?\[]")
_NUMERIC_LABEL = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)", re.IGNORECASE)


class UrlKey(str):
    """The permission key of a URL: ``scheme://host[:port]/path?query``, canonical.

    Attributes:
        exact: False when the URL could not be read exactly (then it matches every deny and ask
            rule and never an allow rule).
        scheme, host, port, rest: its parts (``port`` None for the scheme's default; ``rest``
            the path and query).

    Example:
        >>> url_key("https://Docs.Python.org./3/").matched_by("docs.python.org")
        True
    """

    exact: bool = True
    scheme: str = ""
    host: str = ""
    port: int | None = None
    rest: str = ""

    @property
    def hostport(self) -> str:
        """The host with its port when the port is not the scheme's default."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"

    def matched_by(self, pattern: str, *, every: bool = True) -> bool:
        """Whether the rule pattern ``pattern`` names this URL.

        A pattern without ``/`` names hosts (``example.com``, ``*.example.com``, ``example.com*``);
        one with a path names URLs (``docs.python.org/3/*``); a pattern starting ``https://``
        names only that scheme. Deny and ask rules (``every=False``) also match the URL with its
        port left out, so ``evil.com/*`` holds for ``evil.com:8443``; an allow rule must name a
        port other than the default (``host:*`` names every port, the default included).
        """
        if not self.exact:
            return not every
        scheme, host_pattern, rest_pattern = _split_pattern(pattern)
        if scheme is not None and not fnmatch.fnmatchcase(self.scheme, scheme):
            return False
        host = _bracketed(self.host)
        if self.port is None:  # the default port, left out or written: "evil.com:*" names it too
            hosts = [host, f"{host}:{_SCHEMES[self.scheme]}"]
        else:
            hosts = [self.hostport] if every else [self.hostport, host]
        if not rest_pattern:
            return any(fnmatch.fnmatchcase(h, host_pattern) for h in hosts)
        return any(fnmatch.fnmatchcase(h + self.rest, host_pattern + rest_pattern) for h in hosts)


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _split_pattern(pattern: str) -> tuple[str | None, str, str]:
    """A rule pattern as (scheme or None, host pattern, path pattern), its host written canonically.

    A host without wildcards is read as a URL's host is (``EVIL.com.`` → ``evil.com``, ``127.1`` →
    ``127.0.0.1``, Unicode → punycode); with wildcards, each label without one is.
    """
    text = pattern.strip()
    scheme: str | None = None
    if "://" in text:
        scheme, text = text.split("://", 1)
        scheme = scheme.lower()
    cut = min((i for i in (text.find("/"), text.find("?")) if i >= 0), default=len(text))
    host, rest = text[:cut], text[cut:]
    port = ""
    if host.startswith("[") and "]" in host:  # [IPv6] or [IPv6]:port
        host, port = host[1:].split("]", 1)
    elif host.count(":") == 1:
        host, port = host.split(":")
        port = ":" + port
    if not _GLOB.search(host):
        canonical = _canonical_host(_idna(host))
        if canonical is not None:
            return scheme, _glob_bracketed(canonical) + port, rest
    labels = [label if _GLOB.search(label) else _idna(label) for label in host.lower().rstrip(".").split(".")]
    return scheme, _glob_bracketed(".".join(labels)) + port, rest


def _glob_bracketed(host: str) -> str:
    """An IPv6 host in brackets, as a glob matching them literally (``[[]::1]``)."""
    return f"[[]{host}]" if ":" in host else host


def _idna(host: str) -> str:
    """``host`` in ASCII (punycode for Unicode labels), or as written when it cannot be encoded."""
    if host.isascii():
        return host.lower()
    try:
        return idna.encode(host.lower(), uts46=True).decode("ascii")
    except idna.IDNAError:
        return host.lower()


def _inexact(text: str) -> UrlKey:
    key = UrlKey(text)
    key.exact = False
    return key


def _canonical_host(raw: str) -> str | None:
    """The host in canonical form, or None when it cannot be read exactly."""
    host = raw.lower()
    if host.endswith("."):
        host = host[:-1]
    if not host or host.startswith(".") or ".." in host:
        return None
    if ":" in host:  # IPv6 (httpx gives it without brackets); a zone id is refused
        try:
            return ipaddress.IPv6Address(host).compressed if "%" not in host else None
        except ValueError:
            return None
    if _NUMERIC_LABEL.fullmatch(host.rsplit(".", 1)[-1]):
        # A numeric last label means an IPv4 address, in any of the forms resolvers accept
        # (2130706433, 0x7f.1, 127.1): one canonical dotted form, or unreadable.
        try:
            return socket.inet_ntoa(socket.inet_aton(host))
        except OSError:
            return None
    return host if re.fullmatch(r"[a-z0-9_.-]+", host) else None


def url_key(url: Any) -> UrlKey:
    """The canonical key of ``url``; an inexact key when it cannot be read exactly."""
    text = url if isinstance(url, str) else repr(url)
    if not isinstance(url, str) or not text or _AMBIGUOUS.search(text):
        return _inexact(text)
    try:
        parsed = httpx.URL(text)
        raw_host = parsed.raw_host.decode("ascii")
    except (httpx.InvalidURL, UnicodeError, ValueError):
        return _inexact(text)
    scheme = parsed.scheme.lower()
    if scheme not in _SCHEMES or parsed.userinfo:
        return _inexact(text)
    host = _canonical_host(raw_host)
    if host is None:
        return _inexact(text)
    port = parsed.port if parsed.port not in (None, _SCHEMES[scheme]) else None
    if port is not None and not 0 < port < 65536:
        return _inexact(text)
    rest = parsed.raw_path.decode("ascii", "replace") or "/"
    key = UrlKey(f"{scheme}://{_bracketed(host)}{'' if port is None else f':{port}'}{rest}")
    key.scheme, key.host, key.port, key.rest = scheme, host, port, rest
    return key


class UrlArgument:
    """A network tool's ``permission_key``: names the argument holding the URL.

    The permission layer calls ``canonical`` to get the ``UrlKey`` rules match.
    """

    __slots__ = ("name",)

    def __init__(self, name: str = "url") -> None:
        self.name = name

    def __call__(self, arguments: dict[str, Any]) -> str:
        """The canonical URL (as text) of the call's URL argument."""
        return url_key(arguments.get(self.name, ""))

    def canonical(self, arguments: dict[str, Any], working_dir: Any = None) -> UrlKey:
        """The ``UrlKey`` of the call's URL argument."""
        return url_key(arguments.get(self.name, ""))


def refused_address(address: str) -> str | None:
    """Why ``address`` (an IP address as text) must not be reached by default, or None when it may.

    Example:
        >>> refused_address("169.254.169.254")
        'a link-local address (cloud metadata services live here)'
    """
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return "not an address that can be read"
    if isinstance(ip, ipaddress.IPv6Address):
        inner = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if inner is not None:
            why = refused_address(str(inner))
            if why is not None:
                return why
    if ip.is_loopback:
        return "a loopback address (this machine)"
    if ip.is_link_local:
        return "a link-local address (cloud metadata services live here)"
    if ip.is_private:
        return "a private network address"
    if ip.is_multicast:
        return "a multicast address"
    if not ip.is_global:
        return "an address that is not publicly routable"
    return None
