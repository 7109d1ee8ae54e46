"""The event payload types (agent_kernel/payloads.py), PAYLOADS and docs/events.md."""

from __future__ import annotations

from pathlib import Path

from agent_kernel.events._event import PAYLOADS, EventType
from agent_kernel.events.payloads import events_markdown

from .payload_check import payload_problem

DOC = Path(__file__).resolve().parent.parent / "docs" / "events.md"


def test_every_event_type_has_a_payload_type() -> None:
    assert set(PAYLOADS) == set(EventType)


def test_docs_events_md_is_generated_from_the_payload_types_and_current() -> None:
    assert DOC.read_text(encoding="utf-8") == events_markdown() + "\n", (
        "docs/events.md is stale: run `.venv/bin/python scripts/write_events_doc.py`")


def test_docs_events_md_says_what_every_key_of_every_event_means() -> None:
    rows = [line for line in events_markdown().splitlines() if line.startswith("| `")]
    assert rows and all(not line.rstrip().endswith("|  |") for line in rows), [r for r in rows if r.rstrip().endswith("|  |")]


def test_the_payload_check_catches_unknown_missing_and_mistyped_keys() -> None:
    good = {"call_id": "c1", "name": "add", "index": 0}
    assert payload_problem(EventType.TOOL_CALL_START, good) is None
    assert "undocumented keys ['colour']" in str(payload_problem(EventType.TOOL_CALL_START, {**good, "colour": "red"}))
    assert "missing required keys ['index']" in str(payload_problem(EventType.TOOL_CALL_START, {"call_id": "c1", "name": "add"}))
    assert "index" in str(payload_problem(EventType.TOOL_CALL_START, {**good, "index": "0"}))  # strict: no coercion
    retry = {"attempt": 1, "max_retries": 4, "delay_s": 0.5, "error": "x", "kind": "server", "status_code": 500, "partial": False}
    assert payload_problem(EventType.RETRY, retry) is None  # retry_after_s is optional
