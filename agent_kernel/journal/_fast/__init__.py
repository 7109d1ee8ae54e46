"""journal._fast — events as columns: a journal file read fast, or a list of events walked.

The one door into this package: the frames (``journal.frames``, ``journal.event_frame``) import
these names from here, never a module inside, and a contract in ``pyproject.toml`` keeps it so.

* ``columns_from_file`` reads a journal in the writer's byte layout with vectorised byte
  operations (``columns``, ``line_scan``, ``chunk_columns``), and any other journal with DuckDB's
  JSON reader (``any_layout``), the same columns either way.
* ``records_from_file`` gives a journal's event records as dicts, per-token deltas skipped cheaply.
* ``columns_from_events`` walks a list of events (a live agent).
"""

from __future__ import annotations

from agent_kernel.journal._fast.columns import (
    EVENT_TYPES,
    ID_FIELDS,
    EventColumns,
    columns_from_events,
    columns_from_file,
    records_from_file,
    small_pages,
    worker_threads,
)
from agent_kernel.journal._fast.data_pieces import arrow_kind, data_kind

__all__ = [
    "EVENT_TYPES",
    "ID_FIELDS",
    "EventColumns",
    "arrow_kind",
    "columns_from_events",
    "columns_from_file",
    "data_kind",
    "records_from_file",
    "small_pages",
    "worker_threads",
]
