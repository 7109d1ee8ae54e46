"""models.pricing — what a model call costs in USD.

Prices come from ``genai-prices``, a maintained, dated table of providers' published prices that
ships inside the package: nothing is fetched at run time, and upgrading the package brings new
models and price changes. A model it does not know has no price: its cost is ``None``, never 0,
so a sum never hides an unknown. Pass your own ``table`` to ``cost`` or ``price`` for negotiated
rates or models the table lacks; it stands in for the catalogue entirely.

Token classes follow ``Usage``: ``input_tokens`` excludes cache reads and writes, which are priced
separately (Anthropic bills 5-minute cache writes at 1.25x input; OpenAI caches for free and bills
cached input at a discount). Long-context tiers (a higher price past 200K input tokens on some
models) apply per call, as the providers bill them.
"""

from __future__ import annotations

import datetime
import functools
import importlib.metadata
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import genai_prices
from genai_prices import data_snapshot

from agent_kernel.models._base import Usage
from agent_kernel.models._catalog import family


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens of each class (below any long-context tier), and where it comes from."""

    input: float
    output: float
    cache_read: float
    cache_write: float
    as_of: str


#: Models priced here rather than by the catalogue: the offline model runs no language model.
PRICES: Mapping[str, Price] = {"offline": Price(0.0, 0.0, 0.0, 0.0, "agent_kernel")}

_SOURCE = f"genai-prices {importlib.metadata.version('genai-prices')}"
_PROVIDERS = ("anthropic", "openai")


def _split(model_name: str) -> tuple[str | None, str]:
    provider, sep, name = model_name.partition(":")
    if sep and provider in _PROVIDERS:
        return provider, name
    return None, model_name


def _base(value: Any) -> float:
    """A catalogue price (a Decimal, tiered prices, or None) below any tier, as a float."""
    if value is None:
        return 0.0
    return float(getattr(value, "base", value))


@functools.lru_cache(maxsize=512)
def _catalogue(provider: str | None, name: str) -> Any:
    """The catalogue's ``ModelPrice`` for ``name`` (its family if the snapshot is unknown), or None.

    Cached: the loop prices every model call, and a look-up walks the whole table.
    """
    snapshot = data_snapshot.get_snapshot()
    now = datetime.datetime.now(datetime.timezone.utc)
    for ref in dict.fromkeys((name, family(name))):
        try:
            _, model = snapshot.find_provider_model(ref, None, provider, None)
        except LookupError:
            continue
        return model.get_prices(now)
    return None


def price(model_name: str, table: Mapping[str, Price] | None = None) -> Price | None:
    """The price of ``model_name`` (a provider prefix such as ``anthropic:`` is honoured), or None.

    A dated snapshot (``claude-sonnet-4-5-20250929``) costs what its family costs unless it has a
    price of its own.
    """
    provider, name = _split(model_name)
    if table is not None:
        return table.get(name) or table.get(family(name))
    if name in PRICES:
        return PRICES[name]
    found = _catalogue(provider, name)
    if found is None:
        return None
    input_price = _base(found.input_mtok)
    # A provider that lists no cache-write price bills writing the cache as plain input.
    cache_write = _base(found.cache_write_mtok) if found.cache_write_mtok is not None else input_price
    return Price(input_price, _base(found.output_mtok), _base(found.cache_read_mtok), cache_write, _SOURCE)


def cost(model_name: str, usage: Usage, table: Mapping[str, Price] | None = None) -> float | None:
    """USD cost of ``usage`` (one model call) on ``model_name``; None when its price is not known.

    Example:
        >>> cost("claude-sonnet-4-5", Usage(input_tokens=100_000))
        0.3
    """
    provider, name = _split(model_name)
    if table is not None or name in PRICES:
        p = price(model_name, table)
        if p is None:
            return None
        total = (
            usage.input_tokens * p.input
            + usage.output_tokens * p.output
            + usage.cache_read_tokens * p.cache_read
            + usage.cache_write_tokens * p.cache_write
        )
        return total / 1_000_000
    found = _catalogue(provider, name)
    if found is None:
        return None
    # The catalogue counts cache reads and writes inside the input tokens; Usage does not.
    billed = genai_prices.Usage(
        input_tokens=usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        output_tokens=usage.output_tokens,
    )
    priced: Decimal = found.calc_price(billed)["total_price"]
    return float(priced)
