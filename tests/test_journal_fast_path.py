"""The journal readers of the frames: the fast one, the writer's layout it relies on and its limits;
DuckDB's for any other layout; and that both always agree with the plain reader (``reader.read_events``)."""

from __future__ import annotations

import json
import random
import warnings
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_kernel.errors import JournalError
from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.journal import Journal, SkippedLinesWarning, TornLineWarning, read_events
from agent_kernel.journal import _format as format
from agent_kernel.journal._fast import any_layout, chunk_columns, line_scan
from agent_kernel.journal._frames import events_df, tool_calls_df, turns_df
from agent_kernel.journal._writer import event_line

T0 = 1_718_000_000.0


def write(path: Path, events: list[AgentEvent]) -> Path:
    with Journal(path) as journal:
        for e in events:
            journal.write(e)
    return path


def no_duckdb_reading(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("a journal in the writer's layout must not need DuckDB's reader")


def forbid_slow_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    """Makes the reader of other layouts (``journal._fast.any_layout``) fail the test if it is used."""
    monkeypatch.setattr(any_layout, "read_columns", no_duckdb_reading)
    monkeypatch.setattr(any_layout, "read_records", no_duckdb_reading)


def read_by_duckdb(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records each use of the reader of other layouts (``journal._fast.any_layout``): the list of uses."""
    used: list[str] = []
    for name in ("read_columns", "read_records"):
        def spy(*args: Any, _read: Any = getattr(any_layout, name), _name: str = name, **kwargs: Any) -> Any:
            used.append(_name)
            return _read(*args, **kwargs)

        monkeypatch.setattr(any_layout, name, spy)
    return used


# -- the layout -------------------------------------------------------------------------------


def test_every_event_type_fits_the_fast_readers_limits() -> None:
    # A type the fast reader cannot recognise sends every journal holding it to the slow path:
    # raise format.MAX_TYPE_NAME (and the words line_scan._type_codes reads), or shorten the name.
    assert format.unfit_type_names(kind.value for kind in EventType) == []


def test_a_name_past_the_limit_or_with_other_characters_is_unfit() -> None:
    longest = "x" * format.MAX_TYPE_NAME
    assert format.unfit_type_names([longest, longest + "x", "Text-Delta", ""]) == [longest + "x", "Text-Delta", ""]


def test_the_writer_writes_the_layout_the_format_module_states(tmp_path: Path) -> None:
    event = AgentEvent(7, T0 + 0.25, "s_1", "r_1", "t_1", None, 3, EventType.TOOL_RESULT, {"content": "caf\u00e9", "n": [1]}, "a_1")
    delta = AgentEvent(8, T0, "s_1", "r_1", "t_1", None, 3, EventType.TEXT_DELTA, {"text": "hi"})
    line, delta_line = (row + "\n" for row in write(tmp_path / "j.jsonl", [event, delta]).read_text().splitlines()[1:])
    assert line == event_line(event) and delta_line == event_line(delta)
    assert line.startswith(format.SEQ_KEY + "7" + format.TS_KEY) and line.endswith(format.LINE_END)
    assert format.TYPE_KEY + "tool_result" + format.DATA_KEY in line and line.isascii()
    assert list(json.loads(line)) == list(format.FIELD_ORDER)
    before_payload = line[: line.index(format.DATA_KEY) + 1]
    assert before_payload.count(format.ITEM_SEPARATOR) == format.TOP_LEVEL_COMMAS
    assert len(line) >= format.MIN_LINE
    payload = delta_line.split(format.DATA_KEY)[1].removesuffix(format.LINE_END)
    assert payload == format.STRING_PAYLOAD_OPEN + "text" + format.STRING_PAYLOAD_KEY_END + "hi" + format.STRING_PAYLOAD_CLOSE


def test_a_journal_with_every_event_type_reads_fast(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = [AgentEvent(i, T0 + i, "s", "r", "t", None, 0, kind, {"k": i}) for i, kind in enumerate(EventType, 1)]
    path = write(tmp_path / "j.jsonl", events)
    forbid_slow_reading(monkeypatch)
    fast = events_df(path)
    monkeypatch.undo()
    assert fast["type"].tolist() == [kind.value for kind in EventType]
    pd.testing.assert_frame_equal(fast, events_df(events))


# -- when the fast path cannot apply ----------------------------------------------------------


def reserialised(source: Path, target: Path, *, reorder: bool) -> Path:
    """``source`` as another tool would write it again: json.dumps' default spaces, keys maybe reversed."""
    with open(source) as f, open(target, "w") as out:
        for line in f:
            record = json.loads(line)
            if reorder and "seq" in record:
                record = dict(reversed(list(record.items())))
            out.write(json.dumps(record) + "\n")
    return target


def some_events(count: int) -> list[AgentEvent]:
    return [
        AgentEvent(i, T0 + i, "s", "r", "t", None, 0, EventType.TEXT_DELTA if i % 4 else EventType.TOOL_RESULT,
                   {"text": f"tok {i}"} if i % 4 else {"call_id": f"c{i}", "content": "line\n" * 40, "is_error": False})
        for i in range(1, count + 1)
    ]


@pytest.mark.parametrize("reorder", [False, True])
def test_a_journal_another_tool_rewrote_is_read_by_duckdb_to_the_same_frame_without_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reorder: bool
) -> None:
    events = some_events(1500)
    path = reserialised(write(tmp_path / "j.jsonl", events), tmp_path / "other.jsonl", reorder=reorder)
    used = read_by_duckdb(monkeypatch)
    df = events_df(path)  # a warning would fail the test: they are errors here
    assert used == ["read_columns"]
    pd.testing.assert_frame_equal(df, events_df(events))


def test_the_other_frames_read_a_rewritten_journal_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    canonical = write(tmp_path / "j.jsonl", some_events(40))
    path = reserialised(canonical, tmp_path / "other.jsonl", reorder=False)
    used = read_by_duckdb(monkeypatch)
    for frame in (turns_df, tool_calls_df):
        pd.testing.assert_frame_equal(frame(path), frame(canonical))
    assert used == ["read_records", "read_records"]


def test_a_type_with_flat_and_nested_payloads_reads_each_row_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A tool_start holds scalar ids and nested arguments; a bracket inside a string is not nesting.
    shapes: list[dict[str, Any]] = [
        {"call_id": "c", "name": "grep", "started_at": 1.5},
        {"call_id": "c", "name": "grep", "arguments": {"pattern": "x", "limit": [1, 2]}, "started_at": 1.5},
        {"call_id": "c", "name": "read", "arguments": {}, "note": "a { and a [ in text"},
        {"name": "grep", "call_id": "c", "started_at": 2},
    ]
    events = [AgentEvent(i + 1, T0 + i, "s", "r", f"t{i // 700}", None, 0, EventType.TOOL_START, dict(shapes[i % len(shapes)]))
              for i in range(2800)]
    path = write(tmp_path / "j.jsonl", events)
    forbid_slow_reading(monkeypatch)
    fast = events_df(path)
    monkeypatch.undo()
    pd.testing.assert_frame_equal(fast, events_df(events))
    assert fast["arguments"].tolist()[:4] == [None, {"pattern": "x", "limit": [1, 2]}, {}, None]
    assert fast["started_at"].dtype == "float64" and fast["note"].notna().sum() == 700


def mixed_events(count: int) -> list[AgentEvent]:
    """Deltas, flat results and nested calls, with a type that turns from flat to nested midway."""
    events = []
    for i in range(1, count + 1):
        if i % 3 == 0:
            kind, data = EventType.TOOL_START, {"call_id": f"c{i}", "name": "grep", **({"arguments": {"pattern": "x"}} if i > count // 2 else {})}
        elif i % 3 == 1:
            kind, data = EventType.TOOL_RESULT, {"call_id": f"c{i}", "content": "line [1]\n" * 4, "is_error": False}
        else:
            kind, data = EventType.TEXT_DELTA, {"text": f"tok {i}"}
        events.append(AgentEvent(i, T0 + i, "s", "r", f"t{i // 500}", None, i // 500, kind, data, None if i % 7 else "a_1"))
    return events


@pytest.mark.parametrize("layout", ["writer", "another tool"])
def test_a_journal_read_in_many_small_chunks_gives_the_same_frame(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    events = mixed_events(6000)
    path = write(tmp_path / "j.jsonl", events)
    if layout != "writer":
        path = reserialised(path, tmp_path / "other.jsonl", reorder=True)
    monkeypatch.setattr(line_scan, "CHUNK", 16 << 10)  # dozens of chunks: shapes learnt, buffers reused
    monkeypatch.setattr(chunk_columns, "_ARROW_MIN_ROWS", 16)  # so each chunk's types take every parser
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = events_df(path)
    assert caught == []
    monkeypatch.undo()
    pd.testing.assert_frame_equal(df, events_df(events))


def test_a_rewritten_journal_with_blank_and_damaged_lines_names_the_damaged_ones_and_reads_the_rest(tmp_path: Path) -> None:
    canonical = write(tmp_path / "j.jsonl", some_events(300))
    path = reserialised(canonical, tmp_path / "other.jsonl", reorder=False)
    lines = path.read_text().splitlines(keepends=True)
    damaged = lines[50][:30] + "\n"  # a text delta's line, cut short
    path.write_text("".join(lines[:10] + ["\n", "  \n"] + lines[10:50] + [damaged, "[1, 2]\n"] + lines[51:]))
    named = r"skipped 2 damaged lines \(lines 53, 54\)"
    with pytest.warns(SkippedLinesWarning, match=named):
        df = events_df(path)
    with pytest.warns(SkippedLinesWarning, match=named):
        pd.testing.assert_frame_equal(df, events_df(read_events(path)))
    with pytest.warns(SkippedLinesWarning, match=named):
        pd.testing.assert_frame_equal(turns_df(path), turns_df(canonical))  # turns_df leaves the deltas out


def test_a_line_only_json_reads_as_a_record_sends_the_file_to_the_plain_reader(tmp_path: Path) -> None:
    # DuckDB refuses an escaped lone surrogate, which an older writer kept and json reads.
    events = some_events(30)
    events[7] = AgentEvent(8, T0 + 8, "s", "r", "t", None, 0, EventType.TOOL_RESULT, {"call_id": "c8", "content": {"parts": ["half \ud800 pair"]}})
    canonical = write(tmp_path / "j.jsonl", events)
    path = reserialised(canonical, tmp_path / "other.jsonl", reorder=True)
    df = events_df(path)
    pd.testing.assert_frame_equal(df, events_df(canonical))
    assert df["content"].tolist()[7] == {"parts": ["half \ud800 pair"]}
    pd.testing.assert_frame_equal(turns_df(path), turns_df(canonical))


def test_a_rewritten_journal_with_a_line_too_long_for_duckdb_is_read_by_the_plain_reader(tmp_path: Path) -> None:
    events = some_events(20)
    events[5] = AgentEvent(6, T0 + 6, "s", "r", "t", None, 0, EventType.TOOL_RESULT, {"call_id": "c6", "content": "x" * (40 << 20)})
    canonical = write(tmp_path / "j.jsonl", events)
    path = reserialised(canonical, tmp_path / "other.jsonl", reorder=True)
    pd.testing.assert_frame_equal(events_df(path), events_df(canonical))
    pd.testing.assert_frame_equal(tool_calls_df(path), tool_calls_df(canonical))


def test_a_journal_whose_ids_hold_a_comma_is_read_by_duckdb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = [AgentEvent(e.seq, e.ts, "s", "r,1", "t", None, 0, e.type, e.data) for e in some_events(10)]
    used = read_by_duckdb(monkeypatch)
    df = events_df(write(tmp_path / "j.jsonl", events))
    assert used == ["read_columns"] and df["run_id"].tolist() == ["r,1"] * 10


# -- the fast reader agrees with the plain one, whatever the journal ---------------------------

KNOWN_TYPES = [kind.value for kind in EventType]
UNKNOWN_TYPES = ["text_deltas", "x", "compaction_completX", "a_type_name_much_longer_than_any_real_one"]
KEYS = st.sampled_from(["text", "content", "n", "name", "call_id", "usage", "message", "seq", "type", "k\u00e9y", 'q"uote'])
LONG_TEXTS = st.builds(lambda size, tail: "a" * size + tail, st.integers(1000, 70_000), st.sampled_from(["", "\\", "\u00e9", '"']))
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=30)
    | st.text(alphabet="ab \n\t\"\\{[]}\u00e9\u2028\U0001f600", max_size=12)
)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3), max_leaves=6)
PAYLOADS = (
    st.dictionaries(KEYS, SCALARS, max_size=4)  # flat: the fast reader gives these to Arrow
    | st.dictionaries(KEYS, VALUES, max_size=4)
    | st.builds(lambda t: {"text": t}, st.text(max_size=8))  # one string: gathered in place
    | st.builds(lambda t: {"content": t}, LONG_TEXTS)  # past the fast reader's payload limit
)
IDS = st.sampled_from(["s_1", "r_\u00e9", "t-2", 'q"id', "agent.7"])
TEMPLATES = st.tuples(
    st.sampled_from(KNOWN_TYPES) | st.sampled_from(UNKNOWN_TYPES),
    PAYLOADS,
    IDS,
    st.none() | IDS,
    st.integers(min_value=0, max_value=5),
)
JOURNALS = st.fixed_dictionaries(
    {
        "templates": st.lists(TEMPLATES, min_size=1, max_size=4),
        "unknown": st.booleans(),
        "repeat": st.sampled_from([1, 3, 600, 600]),  # 600: past the fast reader's per-type threshold for Arrow
        "seed": st.integers(0, 2**16),
        "torn": st.booleans(),
        "reserialise": st.sampled_from(["no", "spaces", "spaces and reordered keys", "unicode"]),
        "first_seq": st.sampled_from([1, 10**12]),
    }
)


def journal_text(spec: dict[str, Any]) -> tuple[bytes, bool]:
    """The file the spec describes, and whether it is in the writer's layout."""
    rnd = random.Random(spec["seed"])
    templates = [t for t in spec["templates"] if spec["unknown"] or t[0] in KNOWN_TYPES]
    if not templates:
        templates = [("text_delta", {"text": "x"}, "s_1", None, 0)]
    header = json.dumps({"schema": 1, "session_id": "s_1", "created": T0}, separators=(",", ":"))
    lines = [header + "\n"]
    for i in range(len(templates) * spec["repeat"]):
        kind, payload, run_id, agent_id, iteration = templates[rnd.randrange(len(templates))]
        stand_in = kind if kind in KNOWN_TYPES else "error"
        event = AgentEvent(spec["first_seq"] + i, T0 + i * 0.001 + rnd.random(), "s_1", run_id, f"t_{iteration}", None, iteration,
                           EventType(stand_in), payload, agent_id)
        line = event_line(event)
        if kind != stand_in:
            line = line.replace(format.TYPE_KEY + stand_in + format.DATA_KEY, format.TYPE_KEY + kind + format.DATA_KEY, 1)
        lines.append(line)
    canonical = spec["reserialise"] == "no"
    if not canonical:
        again = [lines[0]]
        for line in lines[1:]:
            record = json.loads(line)
            if spec["reserialise"] == "spaces and reordered keys":
                record = dict(reversed(list(record.items())))
            again.append(json.dumps(record, ensure_ascii=spec["reserialise"] != "unicode") + "\n")
        lines = again
    text = "".join(lines).encode()
    if spec["torn"]:
        text += lines[-1].encode()[: len(lines[-1]) // 2]
    return text, canonical


def read_both(path: Path) -> tuple[Any, Any, list[warnings.WarningMessage]]:
    """The frame from the fast reader and from the plain one (or the error each raised), and the
    fast reader's warnings."""
    outcomes: list[Any] = []
    caught: list[warnings.WarningMessage] = []
    for read in (lambda: events_df(path), lambda: events_df(read_events(path))):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                outcomes.append(read())
            except JournalError as exc:
                outcomes.append(exc)
        if not caught:
            caught = list(seen)
    return outcomes[0], outcomes[1], caught


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(spec=JOURNALS)
def test_the_fast_reader_gives_the_plain_readers_frame_for_any_journal(tmp_path_factory: pytest.TempPathFactory, spec: dict[str, Any]) -> None:
    path = tmp_path_factory.mktemp("journal") / "j.jsonl"
    text, canonical = journal_text(spec)
    path.write_bytes(text)
    with patch.object(any_layout, "read_columns", wraps=any_layout.read_columns) as duckdb_reader:
        fast, plain, caught = read_both(path)
    assert not isinstance(fast, JournalError), fast
    pd.testing.assert_frame_equal(fast, plain)  # an unknown event type is left out by both
    kinds = [type(w.message) for w in caught]
    assert kinds.count(TornLineWarning) == int(spec["torn"])
    whole = text.splitlines()[1:-1] if spec["torn"] else text.splitlines()[1:]
    unknown = any(json.loads(line)["type"] not in KNOWN_TYPES for line in whole)
    assert kinds.count(SkippedLinesWarning) == int(unknown)  # counted and named, never a refusal
    assert len(kinds) == int(spec["torn"]) + int(unknown)  # whatever the layout, nothing else to say
    # The writer's layout takes the fast path, unless a newer version's event type is in it.
    assert duckdb_reader.called == (not canonical or unknown)


@pytest.mark.parametrize("odd", [float("nan"), 2**70, -(2**63) - 1])
def test_values_past_what_json_libraries_agree_on_read_as_the_plain_reader_reads_them(tmp_path: Path, odd: object) -> None:
    # NaN and integers past 64 bits are valid for Python's json; faster parsers refuse them or
    # turn them into floats. The fast reader must give the plain reader's frame all the same.
    path = tmp_path / "odd.jsonl"
    journal = Journal(path, session_id="s")
    for seq in range(1, 301):
        data = {"value": odd if seq % 2 else 2**70, "nested": {"n": seq}}
        journal.write(AgentEvent(seq, float(seq), "s", "r", "t", None, 0, EventType.TOOL_RESULT, data))
    journal.close()
    fast = events_df(path)
    plain = events_df(read_events(path))
    pd.testing.assert_frame_equal(fast, plain)
    assert fast["value"].iloc[1] == 2**70


@pytest.mark.parametrize("values", [[2**63, 1], [2**60, 1.5], [1e300, 2.5]])
def test_flat_payloads_with_numbers_past_exact_floats_read_as_the_plain_reader_reads_them(tmp_path: Path, values: list[Any]) -> None:
    # Arrow's JSON reader, which takes the flat payloads of frequent types, reads 2**63 as a float.
    path = tmp_path / "flat.jsonl"
    journal = Journal(path, session_id="s")
    for seq in range(1, 301):
        journal.write(AgentEvent(seq, float(seq), "s", "r", "t", None, 0, EventType.TOOL_RESULT, {"value": values[seq % 2]}))
    journal.close()
    fast = events_df(path)
    pd.testing.assert_frame_equal(fast, events_df(read_events(path)))
    assert fast["value"].tolist()[:2] == [values[1], values[0]]
