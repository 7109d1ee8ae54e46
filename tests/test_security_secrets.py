"""Secrets against a hostile model: found by value, in every encoding, split across deltas, kept private.

The corpus below holds realistic fake credentials of each shape a provider issues, under names that
do not say "key" (so only their value can give them away), and ordinary values that must survive
untouched. The attacks run through the public ``Agent`` API with a ``ScriptedModel`` and the real
``bash`` tool in a real subprocess.
"""

from __future__ import annotations

import base64
import json
import os
import random
import stat
import string
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_kernel import Agent, tool
from agent_kernel.events._event import EventType
from agent_kernel.guard._redaction import Redactor, looks_like_secret, secrets_in_environ
from agent_kernel.models.scripted import ScriptedModel, text, tool_call

_rng = random.Random(20240611)  # fixed: the corpus is the same on every run
_A62 = string.ascii_letters + string.digits


def _r(chars: str, n: int) -> str:
    return "".join(_rng.choice(chars) for _ in range(n))


# name -> a fake secret of a real provider's shape. None of these is a live credential.
SECRETS: dict[str, str] = {
    "OPENAI_DEFAULT": "sk-proj-" + _r(_A62 + "_-", 48),
    "CLAUDE": "sk-ant-api03-" + _r(_A62 + "_-", 90) + "AA",
    "GH": "ghp_" + _r(_A62, 36),
    "GH_FINE": "github_pat_" + _r(_A62, 22) + "_" + _r(_A62, 59),
    "SLACK_BOT": "xoxb-" + _r(string.digits, 12) + "-" + _r(string.digits, 13) + "-" + _r(_A62, 24),
    "AWS_ID": "AKIA" + _r(string.ascii_uppercase + string.digits, 16),
    "AWS_S": _r(_A62 + "+/", 40),
    "GOOGLE": "AIza" + _r(_A62 + "_-", 35),
    "HF": "hf_" + _r(_A62, 34),
    "GITLAB": "glpat-" + _r(_A62 + "_-", 20),
    "STRIPE": "sk_live_" + _r(_A62, 24),
    "JWT_SESSION": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyLTQyIn0." + _r(_A62 + "_-", 43),
    "SERVICE_HEX": _r("0123456789abcdef", 40),
    "SERVICE_B62": _r(_A62, 32),
    "INSTANCE_UUID": "3f1b8c2e-9d4a-4e7b-8c1f-2a6d5e9b0c47",
}

# Values a user's environment really holds that are not secrets: they must never be redacted.
ORDINARY: dict[str, str] = {
    "PATH_LIKE": "/usr/local/bin:/usr/bin:/bin:/opt/conda/bin",
    "HOME_LIKE": "/home/someone",
    "LANG_LIKE": "en_US.UTF-8",
    "TERM_LIKE": "xterm-256color",
    "IMAGE": "python3.11-slim-bookworm-amd64",
    "SETTING": "my_super_long_variable_value_1",
    "MODULE": "agent_kernel.jupyter._kernel",
    "SITE": "/opt/conda/envs/py311/lib/python3.11/site-packages",
    "APP": "MyApplicationName2024Edition",
    "WHEEL": "jupyterlab-4.2.5-py3-none-any.whl",
    "TZ_LIKE": "Europe/Amsterdam",
    "UPPER": "ABCDEFGHIJKLMNOPQRSTUV",
    "VERSION": "v1.2.3-rc.4+build.567",
}


def _pieces(secret: str, size: int = 12) -> list[str]:
    """Every run of ``size`` characters of ``secret``: none may appear anywhere."""
    return [secret[i : i + size] for i in range(len(secret) - size + 1)]


def _leaks(secret: str, haystack: str) -> bool:
    return any(piece in haystack for piece in _pieces(secret))


def _everything(agent: Agent, model: ScriptedModel, result: Any, journal: Path) -> str:
    """All a secret could reach: events, journal, RunResult, provider requests and DataFrames."""
    parts = [
        json.dumps([e.to_dict() for e in agent.events], default=str),
        journal.read_text(),
        result.text,
        repr(result),
        json.dumps([[m.to_dict() for m in r.messages] for r in model.requests], default=str),
    ]
    for frame in (agent.events_df(), agent.messages_df(), agent.tool_calls_df()):
        parts.append(frame.astype(str).to_csv())
    return "\n".join(parts)


def _run(tmp_path: Path, script: list[Any], tools: list[Any]) -> tuple[Agent, ScriptedModel, Any, Path]:
    model = ScriptedModel(script)
    journal = tmp_path / "j.jsonl"
    agent = Agent(model, tools=tools, permissions="bypass", working_dir=tmp_path, journal=journal, context=None)
    result = agent.run_sync("go")
    agent.close()
    return agent, model, result, journal


@pytest.fixture
def corpus_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {**SECRETS, **ORDINARY}.items():
        monkeypatch.setenv(name, value)


# ---- the corpus itself ----------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_every_secret_shape_is_recognised_by_its_value(name: str) -> None:
    assert looks_like_secret(SECRETS[name])
    assert secrets_in_environ({name: SECRETS[name]}) == {SECRETS[name]: name}


@pytest.mark.parametrize("name", sorted(ORDINARY))
def test_ordinary_values_are_not_secrets(name: str) -> None:
    assert not looks_like_secret(ORDINARY[name])
    assert secrets_in_environ({name: ORDINARY[name]}) == {}


def test_uuids_in_ordinary_text_are_left_alone() -> None:
    # Only values from the environment are redacted; a UUID the model writes is just text.
    r = Redactor.from_environ({"INSTANCE_UUID": SECRETS["INSTANCE_UUID"]})
    other = "run 7c9e6679-7425-40de-944b-e07fc1f90ae7 finished"
    assert r.redact(other) == other
    assert r.redact(f"id={SECRETS['INSTANCE_UUID']}") == "id=[REDACTED:INSTANCE_UUID]"


def test_a_url_password_is_redacted_and_the_rest_of_the_url_kept() -> None:
    r = Redactor.from_environ({"DATABASE_URL": "postgres://app:Tr0ub4dor3xyz@db.internal:5432/main", "CACHE": "redis://:pw9@cache:6379/0"})
    assert r.redact("connecting with Tr0ub4dor3xyz") == "connecting with [REDACTED:DATABASE_URL]"
    assert r.redact("postgres://app:Tr0ub4dor3xyz@db.internal:5432/main") == "[REDACTED:DATABASE_URL]"
    assert "pw9" not in r.redact("dsn redis://:pw9@cache:6379/0 and :pw9@ too")
    assert r.redact("db.internal:5432") == "db.internal:5432"


def test_a_secret_inside_a_longer_value_is_found() -> None:
    value = f"--verbose --token={SECRETS['GH']} --retries=3"
    r = Redactor.from_environ({"CLI_OPTS": value})
    assert r.redact(f"using {SECRETS['GH']}") == "using [REDACTED:CLI_OPTS]"
    assert r.redact("--retries=3") == "--retries=3"


def test_a_pem_private_key_is_redacted_whole_and_line_by_line() -> None:
    body = [base64.b64encode(bytes(_rng.randrange(256) for _ in range(48))).decode() for _ in range(12)]
    pem = "-----BEGIN PRIVATE KEY-----\n" + "\n".join(body) + "\n-----END PRIVATE KEY-----\n"
    r = Redactor.from_environ({"DEPLOY_CERT": pem})
    assert r.redact(pem) == "[REDACTED:DEPLOY_CERT]"
    rewrapped = "".join(body)  # a tool may print the key unwrapped or re-wrapped
    assert not _leaks(rewrapped, r.redact(f"key: {rewrapped}"))
    stream = r.stream()
    shown = "".join(stream.feed(pem[i : i + 5]) for i in range(0, len(pem), 5)) + stream.flush()
    assert not any(line in shown for line in body)


@pytest.mark.parametrize("name", ["OPENAI_DEFAULT", "AWS_S", "CLAUDE", "SERVICE_HEX"])
def test_every_encoding_of_a_secret_is_redacted(name: str) -> None:
    secret = SECRETS[name]
    r = Redactor.from_environ({name: secret})
    raw = secret.encode()
    encodings = {
        "base64": base64.b64encode(raw).decode(),
        "base64url": base64.urlsafe_b64encode(raw).decode().rstrip("="),
        "hex": raw.hex(),
        "HEX": raw.hex().upper(),
        "json": json.dumps({"v": secret}),
        # Inside a longer blob at each byte alignment, as in an HTTP Basic header.
        **{f"basic{k}": base64.b64encode(b"u" * k + b"user:" + raw + b"\n").decode() for k in range(3)},
    }
    for kind, encoded in encodings.items():
        out = r.redact(f"x {encoded} y")
        assert "[REDACTED:" in out, kind
        decoded_parts = [p for p in out.split() if p not in ("x", "y")]
        for part in decoded_parts:  # what is left of the blob no longer decodes to the secret
            for candidate in (part, part.replace("[REDACTED:" + name + "]", "")):
                for decode in (base64.b64decode, base64.urlsafe_b64decode, bytes.fromhex):
                    try:
                        assert secret.encode() not in decode(candidate + "==")
                    except (ValueError, TypeError):
                        pass


# ---- end to end: a hostile model reading the environment ---------------------------------------


def _printing(*names: str) -> str:
    return "; ".join(f'printf "%s\\n" "${name}"' for name in names)


def test_secrets_under_any_name_reach_nothing_through_bash(tmp_path: Path, corpus_env: None) -> None:
    from agent_kernel.tools.builtin._shell import bash

    names = sorted(SECRETS)
    script = [[tool_call("bash", {"command": _printing(*names)})], [tool_call("bash", {"command": "env"})], "done"]
    agent, model, result, journal = _run(tmp_path, script, [bash])
    everything = _everything(agent, model, result, journal)
    for name in names:
        assert not _leaks(SECRETS[name], everything), name
        assert f"[REDACTED:{name}]" in everything
    for name, value in ORDINARY.items():
        assert f"{name}={value}" in everything, name  # env output of ordinary values is intact


def test_a_key_set_after_the_agent_was_built_is_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    late = "sk-" + _r(_A62, 40)

    @tool(read_only=True)
    def set_and_print() -> str:
        """Sets a variable the way a library would, then prints it."""
        os.environ["LATE_SETTING"] = late
        return f"value: {late}"

    monkeypatch.delenv("LATE_SETTING", raising=False)
    try:
        agent, model, result, journal = _run(tmp_path, [[tool_call("set_and_print", {})], "done"], [set_and_print])
    finally:
        os.environ.pop("LATE_SETTING", None)
    everything = _everything(agent, model, result, journal)
    assert not _leaks(late, everything)
    assert "[REDACTED:LATE_SETTING]" in everything


def test_encoded_secrets_printed_by_a_tool_are_redacted(tmp_path: Path, corpus_env: None) -> None:
    from agent_kernel.tools.builtin._shell import bash

    code = (
        "import base64, os; k = os.environ['OPENAI_DEFAULT'].encode(); "
        "print(base64.b64encode(k).decode()); print(base64.urlsafe_b64encode(k).decode()); print(k.hex()); "
        "print(base64.b64encode(b'user:' + k).decode())"
    )
    agent, model, result, journal = _run(tmp_path, [[tool_call("bash", {"command": f'{sys.executable} -c "{code}"'})], "done"], [bash])
    [tool_result] = [e for e in agent.events if e.type is EventType.TOOL_RESULT]
    lines = tool_result.data["content"].splitlines()
    assert all("[REDACTED:OPENAI_DEFAULT]" in line for line in lines[:4]), lines
    raw = SECRETS["OPENAI_DEFAULT"].encode()
    everything = _everything(agent, model, result, journal)
    for encoded in (base64.b64encode(raw).decode(), raw.hex(), base64.urlsafe_b64encode(raw).decode()):
        assert not _leaks(encoded, everything)


# ---- a key split across streamed text deltas ----------------------------------------------------


@pytest.mark.parametrize("chunk", [1, 3, 7, 16])
def test_a_key_split_across_text_deltas_is_redacted_in_every_record(tmp_path: Path, corpus_env: None, chunk: int) -> None:
    secret = SECRETS["CLAUDE"]
    said = f"Here it is: {secret} -- and again {secret[:10]}… that was only a prefix."
    agent, model, result, journal = _run(tmp_path, [[text(said, chunk=chunk)]], [])
    everything = _everything(agent, model, result, journal)
    assert not _leaks(secret, everything)
    deltas = [json.loads(line) for line in journal.read_text().splitlines()[1:]]
    streamed = "".join(d["data"]["text"] for d in deltas if d["type"] == "text_delta")
    expected = f"Here it is: [REDACTED:CLAUDE] -- and again {secret[:10]}… that was only a prefix."
    assert streamed == expected  # nothing lost, nothing duplicated: the held tail was released
    assert result.text == expected
    [complete] = [e for e in agent.events if e.type is EventType.LLM_COMPLETE]
    assert complete.data["message"]["content"][0]["text"] == expected


def test_the_live_stream_never_shows_a_secret_prefix_longer_than_it_holds(tmp_path: Path, corpus_env: None) -> None:
    secret = SECRETS["GH"]
    model = ScriptedModel([[text(f"token {secret} end", chunk=2)]])
    agent = Agent(model, journal=None, context=None)

    async def collect() -> list[str]:
        return [e.data["text"] async for e in agent.stream("go") if e.type is EventType.TEXT_DELTA]

    import asyncio

    shown = asyncio.run(collect())
    assert "".join(shown) == "token [REDACTED:GH] end"
    assert not any(secret[:4] in piece for piece in shown)


# ---- files on disk ---------------------------------------------------------------------------


def test_journals_and_session_folders_are_private_to_their_owner(tmp_path: Path) -> None:
    agent = Agent(ScriptedModel(["hi"]), working_dir=tmp_path, context=None)
    agent.run_sync("go")
    path = Path(agent.journal.path)
    agent.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for folder in (path.parent, path.parent.parent):  # .agent_kernel/sessions and .agent_kernel
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
