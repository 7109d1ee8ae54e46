"""SQL over many journals: the views match the DataFrames column for column, damaged input is
skipped with a count, and the errors say what to do."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from agent_kernel.errors import JournalError, UserError
from agent_kernel.journal import SkippedLinesWarning, load_journals, read_events, sql
from agent_kernel.journal._event_frame import EVENT_COLUMNS
from agent_kernel.journal._sql import COMMON_DATA_KEYS, connect

from .journal_events import recorded_run
from .journal_fleet import delegating_agent, fleet, write

KEYS = {
    "turns": ["session_id", "turn_id"],
    "tool_calls": ["session_id", "run_id", "call_id"],
    "usage": ["session_id", "seq"],
    "messages": ["session_id", "position"],
    "events": ["session_id", "seq"],
}


@pytest.fixture
async def journals(tmp_path: Path) -> list[Path]:
    return await fleet(tmp_path / "runs")


def plain(value: Any) -> Any:
    """A cell as a comparable Python value (every missing value is None)."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if hasattr(value, "tolist") and not isinstance(value, str):
        return value.tolist()
    return None if value is None or (not isinstance(value, (list, dict)) and pd.isna(value)) else value


def assert_same_column(name: str, frame: pd.Series, got: pd.Series) -> None:
    if isinstance(frame.dtype, pd.DatetimeTZDtype):
        expected = frame.astype("datetime64[ns, UTC]")
        actual = pd.to_datetime(got, utc=True).astype("datetime64[ns, UTC]")
        assert expected.isna().tolist() == actual.isna().tolist(), name
        gaps = (expected - actual).abs().dropna()
        assert (gaps <= pd.Timedelta(microseconds=1)).all(), name  # SQL keeps microseconds
        return
    for a, b in zip(frame.tolist(), got.tolist()):
        a, b = plain(a), plain(b)
        if name == "message":
            a, b = a.to_dict(), json.loads(b)
        if isinstance(a, float) and b is not None:
            assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9), (name, a, b)
        else:
            assert a == b, (name, a, b)


def assert_same_frame(kind: str, frame: pd.DataFrame, got: pd.DataFrame) -> None:
    assert len(got) == len(frame), kind
    frame = frame.sort_values(KEYS[kind], ignore_index=True)
    got = got.sort_values(KEYS[kind], ignore_index=True)
    for name in frame.columns:
        assert_same_column(name, frame[name], got[name])


@pytest.mark.parametrize("kind", ["turns", "tool_calls", "usage", "messages"])
def test_each_view_has_the_columns_and_values_of_its_frame(journals: list[Path], kind: str) -> None:
    frame = load_journals(journals, kind)
    got = sql(f"SELECT * FROM {kind}", journals)
    assert list(got.columns) == list(frame.columns)
    assert_same_frame(kind, frame, got)


def test_the_events_view_has_the_envelope_and_the_common_data_keys_of_events_df(journals: list[Path]) -> None:
    frame = load_journals(journals)
    got = sql("SELECT * FROM events", journals)
    assert list(got.columns) == [*EVENT_COLUMNS, *COMMON_DATA_KEYS, "data"]
    assert_same_frame("events", frame[list(EVENT_COLUMNS)], got)
    frame, got = frame.sort_values(KEYS["events"], ignore_index=True), got.sort_values(KEYS["events"], ignore_index=True)
    for key in COMMON_DATA_KEYS:
        if key in frame:
            assert_same_column(key, frame[key], got[key])
    # Every key, common or not, is in data as recorded.
    recorded = {(e.session_id, e.seq): e.data for path in journals for e in read_events(path)}
    assert {(s, q): json.loads(d) for s, q, d in zip(got["session_id"], got["seq"], got["data"])} == recorded


def test_the_sub_agent_and_the_failed_tool_are_there(journals: list[Path]) -> None:
    calls = sql(
        "SELECT name, agent_id IS NOT NULL AS in_child, parent_agent_id, is_error, result_preview "
        "FROM tool_calls WHERE session_id NOT IN ('s_frames', 's_cut') ORDER BY start",
        journals,
    )
    assert calls["name"].tolist() == ["explode", "task", "add"]
    assert calls["in_child"].tolist() == [False, False, True]
    assert calls["is_error"].tolist() == [True, False, False]
    assert "exploded: test" in calls["result_preview"][0]
    assert pd.isna(calls["parent_agent_id"][2])  # the child's parent is the top-level agent


def test_a_query_counts_by_tool_and_by_model_over_many_journals(journals: list[Path]) -> None:
    by_tool = sql("SELECT name, count(*) AS calls FROM tool_calls GROUP BY name ORDER BY calls DESC, name", journals)
    assert by_tool.to_dict("list") == {"name": ["read", "write", "add", "explode", "task"], "calls": [4, 2, 1, 1, 1]}
    by_model = sql("SELECT model, sum(output_tokens) AS out FROM usage GROUP BY model", journals)
    expected = load_journals(journals, "usage").groupby("model")["output_tokens"].sum()
    assert dict(zip(by_model["model"], by_model["out"])) == expected.to_dict()


def test_a_glob_a_folder_and_a_list_read_the_same_journals(journals: list[Path]) -> None:
    folder = journals[0].parent
    counts = [
        sql("SELECT count(*) AS n FROM events", source)["n"][0]
        for source in (str(folder / "*.jsonl"), folder, journals, [str(folder / "rec*.jsonl"), journals[1], journals[2]])
    ]
    assert len(set(counts)) == 1 and counts[0] == len(load_journals(journals))


async def test_a_folder_finds_the_journals_agents_write_by_default(tmp_path: Path) -> None:
    agent = delegating_agent(None, default_journal=True, working_dir=tmp_path)  # .agent_kernel/sessions/<id>.jsonl
    await agent.run("What is 2 + 3?")
    agent.close()
    got = sql("SELECT DISTINCT session_id FROM turns", tmp_path)
    assert got["session_id"].tolist() == [agent.session_id]


def test_a_running_call_and_turn_have_no_end(journals: list[Path]) -> None:
    turns = sql("SELECT \"end\", ended_by FROM turns WHERE session_id = 's_cut'", journals)
    assert turns["end"].isna().all() and turns["ended_by"].isna().all()
    calls = sql("SELECT call_id, is_error, \"overlaps\" FROM tool_calls WHERE session_id = 's_cut' ORDER BY call_id", journals)
    assert calls["is_error"].isna().tolist() == [False, True, True]
    assert list(calls["overlaps"][0]) == ["c2"]


def test_garbage_lines_and_a_torn_last_line_are_skipped_with_a_count(tmp_path: Path) -> None:
    path = write(tmp_path / "a.jsonl", recorded_run())
    lines = path.read_text().splitlines(keepends=True)
    lines.insert(5, "this is not json\n")
    lines.insert(9, '{"not": "an event"}\n')
    path.write_text("".join(lines) + '{"seq":99,"ts":17')
    with pytest.warns(SkippedLinesWarning, match="skipped 3 damaged lines"):
        got = sql("SELECT count(*) AS n, max(seq) AS last FROM events", path)
    assert (got["n"][0], got["last"][0]) == (31, 31)


def test_a_journal_of_a_newer_schema_is_refused_with_both_versions_and_the_upgrade(tmp_path: Path) -> None:
    write(tmp_path / "a.jsonl", recorded_run())
    (tmp_path / "future.jsonl").write_text('{"schema": 99, "session_id": "s_future", "created": 1.0}\n{"seq": 1}\n')
    with pytest.raises(JournalError, match=r"future.jsonl is a journal of schema 99.*reads schema 1.*pip install -U agent_kernel"):
        sql("SELECT DISTINCT session_id FROM events", tmp_path / "*.jsonl")


def test_events_of_an_unknown_type_are_kept_and_counted(tmp_path: Path) -> None:
    path = write(tmp_path / "a.jsonl", recorded_run())
    with open(path, "a") as f:
        f.write('{"seq":32,"ts":1.0,"session_id":"s_frames","run_id":"r_1","type":"from_the_future","data":{"x":1}}\n')
    with pytest.warns(SkippedLinesWarning, match=r"kept 1 event of types this version does not know \('from_the_future' \(1\)\)"):
        got = sql("SELECT count(*) AS n FROM events WHERE type = 'from_the_future'", path)
    assert got["n"][0] == 1


def test_an_empty_glob_names_the_pattern(tmp_path: Path) -> None:
    pattern = str(tmp_path / "nothing" / "*.jsonl")
    with pytest.raises(JournalError, match="no journal matches .*nothing"):
        sql("SELECT 1", pattern)


def test_a_bad_query_says_what_failed_and_lists_the_views(journals: list[Path]) -> None:
    with pytest.raises(UserError, match="The views are events, turns, tool_calls, usage, messages"):
        sql("SELECT nope FROM turns", journals)


@pytest.mark.parametrize("query", ["", "   ", "-- only a comment"])
def test_a_query_with_no_statement_asks_for_a_select(journals: list[Path], query: str) -> None:
    with pytest.raises(UserError, match="returns no table; write a SELECT"):
        sql(query, journals)


@pytest.mark.parametrize("paths", [None, 42, [42]])
def test_journals_given_as_something_else_than_paths_are_refused_with_the_forms_that_work(paths: Any) -> None:
    with pytest.raises(JournalError, match="pass a path, a glob|must be a path or a glob"):
        sql("SELECT 1", paths)


def test_a_connection_answers_several_queries_over_one_read(journals: list[Path]) -> None:
    con = connect(journals, views={"usage", "turns"})
    try:
        total = con.execute("SELECT sum(output_tokens) FROM usage").fetchone()
        per_turn = con.execute("SELECT sum(output_tokens) FROM turns").fetchone()
    finally:
        con.close()
    assert total == per_turn and total is not None and total[0] > 0


def test_without_duckdb_the_error_says_how_to_install_it(tmp_path: Path) -> None:
    write(tmp_path / "a.jsonl", recorded_run())
    code = (
        "import sys; sys.modules['duckdb'] = None\n"
        "from agent_kernel.journal import sql\n"
        f"try:\n    sql('SELECT 1', {str(tmp_path / 'a.jsonl')!r})\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "UserError" in out and "pip install 'agent_kernel[sql]'" in out


def test_importing_the_journal_package_loads_neither_duckdb_nor_opentelemetry() -> None:
    code = "import sys, agent_kernel.journal; print([m for m in ('duckdb', 'opentelemetry') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
