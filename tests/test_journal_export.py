"""Parquet export: a partitioned dataset DuckDB reads as it is, with a stable schema, written
incrementally, skipping damaged lines with a count."""

from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from agent_kernel.errors import UserError
from agent_kernel.journal import SkippedLinesWarning, export_parquet, load_journals, sql
from agent_kernel.journal._export import PARQUET_SCHEMA
from agent_kernel.journal._sql import COMMON_DATA_KEYS

from .journal_events import recorded_run
from .journal_fleet import fleet, write


def read(out: Path, query: str = "SELECT * FROM lake") -> duckdb.DuckDBPyRelation:
    con = duckdb.connect()
    con.execute(f"CREATE VIEW lake AS SELECT * FROM read_parquet('{out}/**/*.parquet', hive_partitioning = true)")
    return con.execute(query).df()


async def test_duckdb_reads_the_export_as_it_is_and_it_holds_every_event(tmp_path: Path) -> None:
    journals = await fleet(tmp_path / "runs")
    out = tmp_path / "lake"
    result = export_parquet(journals, out)
    frame = load_journals(journals)
    assert (result.exported, result.unchanged, result.events) == (3, 0, len(frame))

    lake = read(out)
    assert len(lake) == len(frame)
    assert list(lake.columns) == [c for c in PARQUET_SCHEMA.names if c != "date"] + ["date"]
    # The same events as the SQL view over the journals, column for column.
    view = sql("SELECT * FROM events", journals)
    key = ["session_id", "seq"]
    lake, view = lake.sort_values(key, ignore_index=True), view.sort_values(key, ignore_index=True)
    for name in ["seq", "session_id", "run_id", "turn_id", "agent_id", "type", *COMMON_DATA_KEYS]:
        assert lake[name].astype(object).where(lake[name].notna(), None).tolist() == \
            view[name].astype(object).where(view[name].notna(), None).tolist(), name
    assert (lake["ts"] == view["ts"]).all()
    assert [json.loads(d) for d in lake["data"]] == [json.loads(d) for d in view["data"]]
    # Partitioned by day: the folders say the dates of the events.
    folders = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert folders == sorted({f"date={d}" for d in lake["date"].astype(str)}) and "date=2023-11-14" in folders


async def test_every_file_has_the_same_schema(tmp_path: Path) -> None:
    journals = await fleet(tmp_path / "runs")
    export_parquet(journals, tmp_path / "lake")
    files = sorted((tmp_path / "lake").rglob("*.parquet"))
    assert len(files) >= 3
    expected = PARQUET_SCHEMA.remove(PARQUET_SCHEMA.get_field_index("date"))
    for f in files:
        assert pq.read_schema(f).remove_metadata().equals(expected), f


async def test_a_second_export_of_unchanged_journals_writes_nothing(tmp_path: Path) -> None:
    journals = await fleet(tmp_path / "runs")
    out = tmp_path / "lake"
    first = export_parquet(journals, out)
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*.parquet")}

    second = export_parquet(str(tmp_path / "runs" / "*.jsonl"), out)

    assert (second.exported, second.unchanged, second.events, second.files) == (0, 3, 0, [])
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*.parquet")} == before
    assert len(read(out)) == first.events


def test_a_journal_that_grew_replaces_its_own_files_only(tmp_path: Path) -> None:
    events = recorded_run()
    grows = write(tmp_path / "runs" / "grows.jsonl", events[:10])
    write(tmp_path / "runs" / "stays.jsonl", events)
    out = tmp_path / "lake"
    export_parquet(tmp_path / "runs", out)
    stays = {p: p.stat().st_mtime_ns for p in out.rglob("stays-*.parquet")}

    with open(grows, "a") as f:  # the session went on
        for e in events[10:]:
            f.write(json.dumps(e.to_dict()) + "\n")
    os.utime(grows, ns=(grows.stat().st_atime_ns, grows.stat().st_mtime_ns + 1_000_000))
    again = export_parquet(tmp_path / "runs", out)

    assert (again.exported, again.unchanged, again.events) == (1, 1, 31)
    assert {p: p.stat().st_mtime_ns for p in out.rglob("stays-*.parquet")} == stays
    counts = read(out, "SELECT journal LIKE '%grows.jsonl' AS grows, count(*) AS n FROM lake GROUP BY ALL ORDER BY grows")
    assert counts["n"].tolist() == [31, 31]


def test_bad_lines_are_skipped_with_a_count(tmp_path: Path) -> None:
    path = write(tmp_path / "a.jsonl", recorded_run())
    with open(path, "a") as f:
        f.write("garbage\n[1, 2]\n" + '{"seq":99,"ts":17')
    with pytest.warns(SkippedLinesWarning, match="skipped 3 damaged lines"):
        result = export_parquet(path, tmp_path / "lake")
    assert result.skipped_lines == 3 and result.events == 31
    assert json.loads((tmp_path / "lake" / "_manifest.json").read_text())["journals"][str(path.resolve())]["skipped_lines"] == 3


def test_partitions_can_be_chosen_and_unknown_ones_are_named(tmp_path: Path) -> None:
    path = write(tmp_path / "a.jsonl", recorded_run())
    export_parquet(path, tmp_path / "by_type", partition_by=("type",))
    assert (tmp_path / "by_type" / "type=tool_result").is_dir()
    counts = read(tmp_path / "by_type", "SELECT type, count(*) AS n FROM lake WHERE type = 'tool_result' GROUP BY type")
    assert counts["n"].tolist() == [3]
    with pytest.raises(UserError, match="cannot partition by 'day'.*'date'"):
        export_parquet(path, tmp_path / "bad", partition_by=("day",))


async def test_the_python_reader_writes_the_rows_duckdb_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_kernel.journal import _export as export

    journals = await fleet(tmp_path / "runs")
    export_parquet(journals, tmp_path / "fast")
    monkeypatch.setattr(export, "_use_duckdb", False)  # as where DuckDB is not installed
    export_parquet(journals, tmp_path / "plain")
    order = "SELECT * EXCLUDE (data), data::JSON AS data FROM lake ORDER BY session_id, seq"
    fast, plain = read(tmp_path / "fast", order), read(tmp_path / "plain", order)
    assert fast.drop(columns="data").equals(plain.drop(columns="data"))
    assert [json.loads(d) for d in fast["data"]] == [json.loads(d) for d in plain["data"]]


def test_an_export_folder_that_cannot_be_made_is_named_and_a_single_partition_column_may_be_a_str(tmp_path: Path) -> None:
    journal = write(tmp_path / "run.jsonl", recorded_run())
    (tmp_path / "taken").write_text("a file")
    with pytest.raises(UserError, match="export_parquet cannot make the folder .*taken.*out_dir= a folder that can be written"):
        export_parquet(journal, tmp_path / "taken" / "out")
    export = export_parquet(journal, tmp_path / "out", partition_by="type")
    assert export.files and all(name.startswith("type=") for name in export.files)
