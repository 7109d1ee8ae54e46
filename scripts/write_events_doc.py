"""Writes docs/events.md from the payload types in agent_kernel/payloads.py."""

from pathlib import Path

from agent_kernel.events.payloads import events_markdown

if __name__ == "__main__":
    target = Path(__file__).resolve().parent.parent / "docs" / "events.md"
    target.write_text(events_markdown() + "\n", encoding="utf-8")
    print(f"wrote {target}")
