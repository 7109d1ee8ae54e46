"""The Agent kernel passes jupyter_kernel_test's protocol conformance suite.

The suite sends Python; in this kernel Python is written after a ``%%python`` line, so every
sample starts with one. Prompts take part where the suite can follow them (a prompt is always
complete; completion offers the name at the cursor). A prompt cell's output includes the live
view's comm messages, for which the suite has no schema, so the last test here checks a prompt
cell's messages itself: the suite's schemas for the rest, the protocol's fields for comms.
Prompts are answered by the offline model, with no key. The kernelspec is the one
``agent_kernel.jupyter.install`` writes, installed into a temporary prefix.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import jupyter_kernel_test as jkt
from jupyter_kernel_test.msgspec_v5 import validate_message

from .kernel_harness import CELL_TIMEOUT, install_kernelspec, start_agent_kernel, stop_agent_kernel


class TestAgentKernelConformance(jkt.KernelTests):
    """jupyter_kernel_test's ``KernelTests`` against the installed ``agent`` kernelspec."""

    kernel_name = "agent"
    language_name = "python"
    file_extension = ".py"

    code_hello_world = "%%python\nprint('hello, world')"
    code_stderr = "%%python\nimport sys\nprint('test', file=sys.stderr)"

    completion_samples = [
        {"text": "%%python\nzi", "matches": {"zip"}},
        {"text": "Tell me what zi", "matches": {"zip"}},
    ]
    complete_code_samples = ["%%python\n1", "%%python\nprint('hello, world')", "%%python\ndef f(x):\n  return x\n\n",
                             "Summarise what df holds", "What does `def f(x):` mean", "%pwd"]
    incomplete_code_samples = ["%%python\nprint('''hello", "%%python\ndef f(x):\n  x*2"]
    invalid_code_samples = ["%%python\nimport = 7q", "%%python\n)"]

    code_page_something = "%%python\nzip?"
    code_generate_error = "%%python\nraise ValueError('boom')"

    code_execute_result = [
        {"code": "%%python\n1+2+3", "result": "6"},
        {"code": "%%python\n[n ** 2 for n in range(4)]", "result": "[0, 1, 4, 9]"},
    ]
    code_display_data = [
        {"code": "%%python\nfrom IPython.display import HTML, display\ndisplay(HTML('<b>test</b>'))",
         "mime": "text/html"},
    ]

    code_history_pattern = "%%python\n1?2*"
    # Not "range": IPython reports the current session as 0 there, which the suite does not expect
    # (the stock python3 kernel fails it the same way).
    supported_history_operations = ("tail", "search")

    code_inspect_sample = "zip"
    code_clear_output = "%%python\nfrom IPython.display import clear_output\nclear_output()"

    _prefix: str

    @classmethod
    def setUpClass(cls) -> None:
        # The suite's own setUpClass looks the spec up on the default path; this one installs it
        # into a temporary prefix and starts it with a keyless, offline environment.
        jkt.TIMEOUT = CELL_TIMEOUT
        cls._prefix = tempfile.mkdtemp(prefix="agent-kernel-spec-")
        home = install_kernelspec(Path(cls._prefix))
        work = Path(cls._prefix) / "work"
        work.mkdir()
        cls.km, cls.kc = start_agent_kernel(home, work)

    @classmethod
    def tearDownClass(cls) -> None:
        stop_agent_kernel(cls.km, cls.kc)
        shutil.rmtree(cls._prefix, ignore_errors=True)

    def test_kernel_info_names_the_agent_kernel(self) -> None:
        """``kernel_info`` says which kernel this is, not IPython's name."""
        self.flush_channels()
        msg_id = self.kc.kernel_info()
        reply = self.kc.get_shell_msg(timeout=CELL_TIMEOUT)
        validate_message(reply, "kernel_info_reply", msg_id)
        self.assertEqual(reply["content"]["implementation"], "agent_kernel")

    def test_a_prompt_cell_follows_the_message_protocol(self) -> None:
        """busy, execute_input, outputs, idle; every message valid; the view's comms well formed."""
        self.flush_channels()
        code = "Say hello"
        msg_id = self.kc.execute(code)
        reply = self.kc.get_shell_msg(timeout=CELL_TIMEOUT)
        validate_message(reply, "execute_reply", msg_id)
        self.assertEqual(reply["content"]["status"], "ok")
        kinds = []
        while True:
            msg = self.kc.get_iopub_msg(timeout=CELL_TIMEOUT)
            self.assertEqual(msg["parent_header"]["msg_id"], msg_id)
            kind = msg["msg_type"]
            kinds.append(kind)
            if kind in _COMM_FIELDS:
                self.assertLessEqual(_COMM_FIELDS[kind], set(msg["content"]), msg)
            else:
                validate_message(msg, kind, msg_id)
            if kind == "status" and msg["content"]["execution_state"] == "idle":
                break
        self.assertEqual(kinds[:2], ["status", "execute_input"])
        # The marker saying the cell went to the agent, the live view, then the summary.
        self.assertEqual(kinds.count("display_data"), 3, kinds)
        self.assertIn("comm_open", kinds)


# The comm messages' required content (Jupyter messaging spec, "Custom Messages").
_COMM_FIELDS = {
    "comm_open": {"comm_id", "target_name", "data"},
    "comm_msg": {"comm_id", "data"},
    "comm_close": {"comm_id", "data"},
}
