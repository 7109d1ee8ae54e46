"""models.pricing — what a model call costs in USD, from a dated per-model price table.

Prices are USD per million tokens, as each provider published them on the date in ``as_of``
(their pricing pages: https://docs.anthropic.com/en/docs/about-claude/pricing and
https://platform.openai.com/docs/pricing). A model missing from the table has no price: its cost
is ``None``, never 0, so a sum never hides an unknown. Pass your own ``table`` to ``cost`` for
negotiated rates or newer models.

Token classes follow ``Usage``: ``input_tokens`` excludes cache reads and writes, which are priced
separately (Anthropic bills cache writes at 1.25x input for the 5-minute cache; OpenAI caches for
free and bills cached input at a discount). Long-context surcharges (over 200K input tokens on
some models) are not modelled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agent_kernel.models._base import Usage
from agent_kernel.models._catalog import family

__all__ = ["PRICES", "Price", "cost", "price"]


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens of each class, and the date the figures were published."""

    input: float
    output: float
    cache_read: float
    cache_write: float
    as_of: str


def _anthropic(input: float, output: float, as_of: str) -> Price:
    # Anthropic: cache reads 0.1x input, 5-minute cache writes 1.25x input.
    return Price(input, output, round(input * 0.1, 6), round(input * 1.25, 6), as_of)


def _openai(input: float, output: float, cached: float, as_of: str) -> Price:
    # OpenAI: writing the prompt cache costs nothing beyond the input tokens themselves.
    return Price(input, output, cached, input, as_of)


PRICES: Mapping[str, Price] = {
    # The offline model runs no language model: free, and known to be.
    "offline": Price(0.0, 0.0, 0.0, 0.0, "2026-11-22"),
    # Anthropic
    "claude-opus-4-6": _anthropic(5.0, 25.0, "2026-02-05"),
    "claude-sonnet-4-6": _anthropic(3.0, 15.0, "2026-02-17"),
    "claude-opus-4-5": _anthropic(5.0, 25.0, "2025-11-24"),
    "claude-opus-4-1": _anthropic(15.0, 75.0, "2025-08-05"),
    "claude-opus-4-0": _anthropic(15.0, 75.0, "2025-05-22"),
    "claude-opus-4": _anthropic(15.0, 75.0, "2025-05-22"),
    "claude-sonnet-4-5": _anthropic(3.0, 15.0, "2025-09-29"),
    "claude-sonnet-4-0": _anthropic(3.0, 15.0, "2025-05-22"),
    "claude-sonnet-4": _anthropic(3.0, 15.0, "2025-05-22"),
    "claude-3-7-sonnet": _anthropic(3.0, 15.0, "2025-02-24"),
    "claude-haiku-4-5": _anthropic(1.0, 5.0, "2025-10-15"),
    "claude-3-5-haiku": _anthropic(0.8, 4.0, "2024-11-04"),
    "claude-3-haiku": _anthropic(0.25, 1.25, "2024-03-13"),
    # OpenAI
    "gpt-5.1": _openai(1.25, 10.0, 0.125, "2025-11-13"),
    "gpt-5": _openai(1.25, 10.0, 0.125, "2025-08-07"),
    "gpt-5-mini": _openai(0.25, 2.0, 0.025, "2025-08-07"),
    "gpt-5-nano": _openai(0.05, 0.4, 0.005, "2025-08-07"),
    "gpt-4.1": _openai(2.0, 8.0, 0.5, "2025-04-14"),
    "gpt-4.1-mini": _openai(0.4, 1.6, 0.1, "2025-04-14"),
    "gpt-4.1-nano": _openai(0.1, 0.4, 0.025, "2025-04-14"),
    "gpt-4o": _openai(2.5, 10.0, 1.25, "2024-11-20"),
    "gpt-4o-2024-05-13": _openai(5.0, 15.0, 5.0, "2024-05-13"),
    "gpt-4o-mini": _openai(0.15, 0.6, 0.075, "2024-07-18"),
    "o3": _openai(2.0, 8.0, 0.5, "2025-06-10"),
    "o3-mini": _openai(1.1, 4.4, 0.55, "2025-01-31"),
    "o4-mini": _openai(1.1, 4.4, 0.275, "2025-04-16"),
    "o1": _openai(15.0, 60.0, 7.5, "2024-12-17"),
}

def price(model_name: str, table: Mapping[str, Price] | None = None) -> Price | None:
    """The price of ``model_name`` (a provider prefix such as ``anthropic:`` is ignored), or None.

    A dated snapshot (``claude-sonnet-4-5-20250929``) costs what its family costs, unless the
    table prices the snapshot itself.
    """
    table = PRICES if table is None else table
    name = model_name.split(":", 1)[1] if ":" in model_name else model_name
    if name in table:
        return table[name]
    return table.get(family(name))


def cost(model_name: str, usage: Usage, table: Mapping[str, Price] | None = None) -> float | None:
    """USD cost of ``usage`` on ``model_name``; None when the model's price is not known.

    Example:
        >>> cost("claude-sonnet-4-5", Usage(input_tokens=1_000_000))
        3.0
    """
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
