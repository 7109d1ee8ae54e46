"""The command reader fails closed: whatever a deny rule names, bash never runs it unjudged.

Hypothesis builds bash lines from a grammar of the shapes a matcher can misread (wrappers with
grouped flags, shells with options before ``-c``, a ``-c`` from an expansion, programs fed
through descriptors, ``eval --``, stored code, ``xargs``, stacking past the depth limit …) around
one denied command, ``rm v``. Real bash runs each line in a throwaway directory where ``rm`` is a
fake that leaves a marker; whenever the marker (or the removal of ``v``) shows bash ran it, the
deny rule ``bash(rm *)`` must have matched the line.
"""

from __future__ import annotations

import os
import platform
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_kernel.guard._permissions import Permissions
from agent_kernel.tools.builtin._shell import bash as bash_tool

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="needs bash to know what a line runs")

DENY = Permissions(mode="bypass", deny=["bash(rm *)"])

# Spellings of the denied command itself.
RM = st.sampled_from(["rm v", "\\rm v", "'rm' v", '"rm" v', "r''m v", "$'\\x72m' v", "r\\m v", "rm -f v", "c=rm; $c v",
                      "${PWD:+rm} v", "$(echo rm) v", "`echo rm` v", "{rm,v}", "r{m,} v"])
# Lines that never run it (the property holds trivially for them; they keep the grammar honest).
DECOYS = st.sampled_from(["true", "echo rm v", "false && rm v", ": rm v", "echo v", "printf '%s\\n' rm"])


def _constructs(inner: st.SearchStrategy[str], arch: str) -> st.SearchStrategy[str]:
    """One construct around a line that may run the denied command."""
    prefixes = ["env", "env -u HOME", "env -iu HOME PATH=$PATH", "env X=1", "X=1", "command", "exec", "nice",
                "nice -n 1", "nohup", "timeout 5", "timeout -s KILL 5", "time", "time -p", "time -o /dev/null",
                "setsid -w", "stdbuf -o0", f"setarch {arch}", "setpriv", "!", "builtin command", "env --", "exec -a x",
                "command -p", "nice -5", "timeout -k 1 5", "env -C .", "echo | xargs"]
    formats = ["sh -c {q}", "bash -c {q}", "bash -c -- {q}", "sh -o errexit -c {q}", "bash -ec {q}",
               "bash -o pipefail -c {q}", "bash ${{PWD:+-c}} {q}", "bash ${{PWD:+-c}} -- {q}", "eval {q}",
               "eval -- {q}", "eval \"$(echo {q})\"", "echo {q} | sh", "printf '%s' {q} | bash", "bash <<< {q}",
               "bash <(echo {q})", "source /dev/stdin <<< {q}", ". <(echo {q})", "echo {q} | xargs -I{{}} sh -c '{{}}'",
               "trap {q} EXIT", "sh -c \"$1\" _ {q}", "bash -c 'eval \"$0\"' {q}", "x={q}; eval \"$x\"",
               "set -- {q}; eval \"$1\"", "echo {q} > s; bash s", "echo {q} > s; . ./s", "BASH_ENV=<(echo {q}) bash -c :",
               "hash -p \"$(command -v rm)\" zz; zz v #{q}", "exec 3<<< {q}; bash /dev/fd/3", "bash -s <<< {q}",
               "${{BASH:-bash}} -c {q}", "sh -c 'eval \"$1\"' _ {q}", "printf '%s\\n' {q} | sh", "echo -e {q} | sh",
               "bash -c {q} ignored", "(eval {q})", "shopt -s expand_aliases\nalias zz={q}\nzz", "trap {q} DEBUG; :",
               "echo {q} | xargs -0 -I@ bash -c @", "env -S {q}", "command eval {q}", "builtin eval {q}",
               "read -r x <<< {q}; eval \"$x\"", "mapfile -t a <<< {q}; eval \"${{a[0]}}\"",
               "x=({q}); eval \"${{x[@]}}\"", "printf '%s\\n' {q} > s; bash < s",
               "cat <<'EOF' | bash\n{raw}\nEOF", "bash <<'EOF'\n{raw}\nEOF", "(( y = 1 << 2 ))\n{raw}\n2"]
    around = ["true; {l}", "true && {l}", "false || {l}", "({l})", "{{ {l}; }}", "if true; then {l}; fi",
              "for i in 1; do {l}; done", "echo $({l})", "cat <({l})", "f() {{ {l}; }}; f", "{l} | cat", "{l} &\nwait"]
    return st.one_of(
        st.tuples(st.sampled_from(prefixes), inner).map(lambda t: f"{t[0]} {t[1]}"),
        st.tuples(st.sampled_from(formats), inner).map(lambda t: t[0].format(q=shlex.quote(t[1]), raw=t[1])),
        st.tuples(st.sampled_from(around), inner).map(lambda t: t[0].format(l=t[1])),
    )


LINES = st.recursive(st.one_of(RM, DECOYS), lambda inner: _constructs(inner, platform.machine() or "x86_64"), max_leaves=4)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("rm-oracle")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "rm"
    fake.write_text(f"#!/bin/sh\n: > {shlex.quote(str(root / 'ran'))}\n")
    fake.chmod(0o755)
    return root


def bash_runs_rm(root: Path, line: str) -> bool:
    """Runs ``line`` with real bash in a fresh directory; whether the (fake or real) rm ran on ``v``."""
    marker, work = root / "ran", root / "work"
    marker.unlink(missing_ok=True)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    (work / "v").write_text("v")
    env = {"PATH": f"{root / 'bin'}:/usr/bin:/bin", "HOME": str(work), "LANG": "C"}
    try:
        subprocess.run([BASH or "bash", "-c", line], cwd=work, env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10, start_new_session=True)
    except subprocess.TimeoutExpired:
        pass
    return marker.exists() or not (work / "v").exists()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(line=LINES)
def test_a_deny_rule_matches_every_line_bash_would_run_the_denied_command_from(sandbox: Path, line: str) -> None:
    if bash_runs_rm(sandbox, line):
        assert DENY.evaluate(bash_tool, {"command": line}).action == "deny", line


def test_the_oracle_sees_the_fake_rm_run_and_not_run(sandbox: Path) -> None:
    # The control for the property: without it, a broken oracle would make the test pass vacuously.
    assert bash_runs_rm(sandbox, "env -iu HOME PATH=$PATH rm v")
    assert bash_runs_rm(sandbox, "bash ${PWD:+-c} 'rm v'")
    assert not bash_runs_rm(sandbox, "echo rm v")
    assert not bash_runs_rm(sandbox, "false && rm v")


@pytest.mark.parametrize(
    "line",
    [
        "env " * 40 + "rm v",
        "eval " * 40 + "rm v",
        "nice env time command " * 12 + "rm v",
        "exec eval env -- " * 12 + "rm v",
    ],
)
def test_stacking_wrappers_past_every_limit_still_matches(line: str) -> None:
    assert DENY.evaluate(bash_tool, {"command": line}).action == "deny"


def test_nesting_shells_past_the_depth_limit_still_matches() -> None:
    line = "rm v"
    for _ in range(12):
        line = f"bash -c {shlex.quote(line)}"
    assert DENY.evaluate(bash_tool, {"command": line}).action == "deny"
    assert os.environ.get("AGENT_KERNEL_APPROVAL") is None
