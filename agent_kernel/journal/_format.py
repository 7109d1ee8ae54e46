"""journal.format — the byte layout of a journal line: what ``Journal`` writes and ``columns`` reads fast.

The writer produces every event line in exactly one shape, and the vectorised reader
(``journal.columns``, with ``line_scan`` and ``chunk_columns``) locates fields by that shape
instead of parsing JSON. Both take the shape from here, so it is stated once::

    {"seq":7,"ts":1700000000.25,"session_id":"s_1","run_id":"r_1","turn_id":"t_1",
     "parent_turn_id":null,"iteration":0,"agent_id":null,"type":"text_delta","data":{"text":"hi"}}\\n

(one line in the file): compact separators, ASCII only (other characters ``\\u`` escaped), the
keys in ``FIELD_ORDER``, ``data`` last. A line in any other shape is still a valid record; the
reader just cannot take its fast path for that file, and reads it with DuckDB instead
(``journal._fast.any_layout``).

The fast reader's limits are here too. ``MAX_TYPE_NAME`` is the longest event type it
recognises without a JSON parser; ``unfit_type_names`` lists any ``EventType`` value beyond a
limit, and a test asserts there is none, so adding a long type fails a test instead of quietly
sending every journal to the DuckDB reader.
"""

from __future__ import annotations

from collections.abc import Iterable

ITEM_SEPARATOR = ","  # json.dumps writes ", " by default; the writer never does
KEY_SEPARATOR = ":"  # json.dumps writes ": " by default
# The order of the keys in every event line. ``data`` is last, so a line splits into envelope
# and payload without parsing the payload.
FIELD_ORDER = ("seq", "ts", "session_id", "run_id", "turn_id", "parent_turn_id", "iteration", "agent_id", "type", "data")
# The fields between ``ts`` and ``type``: they repeat on every line of a turn (and of an agent),
# so the reader parses each distinct section once.
GROUP_FIELDS = FIELD_ORDER[2:8]

SEQ_KEY = '{"seq":'  # a line starts with this, then the decimal seq
TS_KEY = ',"ts":'  # then ts as float.__repr__ writes it
ID_SECTION_START = ',"session_id":'  # then the GROUP_FIELDS, each a JSON scalar
TYPE_KEY = ',"type":"'  # then the type name, a plain snake_case string
DATA_KEY = '","data":'  # closes the type name; the payload object follows
LINE_END = "}\n"  # the record's closing brace, right after the payload's own

# The one-string payload, {"key":"value"}: most lines of a session are per-token deltas of this
# shape. The writer quotes such payloads itself (Journal.write) and the reader gathers values
# that need no unescaping straight from the bytes (chunk_columns.plain_strings).
STRING_PAYLOAD_OPEN = '{"'  # then the key
STRING_PAYLOAD_KEY_END = '":"'  # then the value's text
STRING_PAYLOAD_CLOSE = '"}'  # the value's closing quote and the payload's brace

# Commas at the top level of a line before its payload: after seq, after ts, after each of the
# six id fields but the last (5), before type and before data. Ids never hold a comma (session
# ids cannot; run, turn and agent ids are generated), so the reader finds every field boundary
# by counting commas, and a file where that does not hold is read by DuckDB.
TOP_LEVEL_COMMAS = 8

MAX_TYPE_NAME = 40  # longest type name the fast reader recognises (five machine words)
MAX_ID_SECTION = 2048  # longest id section (GROUP_FIELDS with their keys) read on the fast path
MAX_SEQ_DIGITS = 18  # seq is parsed as int64 column-wise
# The shortest possible line: every key, the shortest values ("" ids, 0.0, a one-letter type, {}).
MIN_LINE = len(
    SEQ_KEY + "0" + TS_KEY + "0.0" + ',"session_id":"","run_id":"","turn_id":null,"parent_turn_id":null'
    ',"iteration":0,"agent_id":null' + TYPE_KEY + "x" + DATA_KEY + "{}" + LINE_END
)


def id_section(session_id: str, run_id: str, turn_id: str, parent_turn_id: str, iteration: str, agent_id: str) -> str:
    """The text from ``,"session_id":`` up to the type name's opening quote; arguments are JSON text."""
    return (
        f'{ID_SECTION_START}{session_id},"run_id":{run_id},"turn_id":{turn_id},"parent_turn_id":{parent_turn_id}'
        f',"iteration":{iteration},"agent_id":{agent_id}{TYPE_KEY}'
    )


def unfit_type_names(names: Iterable[str]) -> list[str]:
    """The names the fast reader cannot recognise: longer than ``MAX_TYPE_NAME``, or not plain
    lowercase ASCII snake_case (a name needing escapes would not sit between fixed bytes)."""
    allowed = set("abcdefghijklmnopqrstuvwxyz0123456789_")
    return [name for name in names if not 0 < len(name) <= MAX_TYPE_NAME or not set(name) <= allowed]
