"""jupyter.setup — ``%agent setup``: choose a provider, a model and a key, and test them for real.

A small form: the provider, a model from the catalog (or any name the server knows), a base URL
for a local or proxy server, and the key in a password field. The key goes into this kernel's
environment only (``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY``), never into the notebook or a
journal: the field is emptied as soon as it is read, so widget state saved with the notebook
holds no key either. "Test" checks the endpoint with two real requests
(``models.endpoint_check``: a streamed completion with its time to first token, and a request
carrying a tool schema), each with a verdict; "Use this model" makes it the session's model.
"""

from __future__ import annotations

import asyncio
import html
import os
from collections.abc import Callable
from typing import Any

from agent_kernel.errors import UserError
from agent_kernel.models._base import Model
from agent_kernel.models._catalog import CONTEXT_WINDOWS, DEFAULT_MODELS
from agent_kernel.models._endpoint_check import EndpointVerdict, check_endpoint
from agent_kernel.models._registry import KEY_ENV, resolve_model

#: Where each provider's SDK reads a base URL from (a local or proxy server).
BASE_URL_ENV = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}


class SetupForm:
    """The form ``%agent setup`` shows; ``test()`` is what its Test button runs.

    Args:
        on_use: called with the model spec (``provider:name``) when "Use this model" is clicked.
    """

    def __init__(self, on_use: Callable[[str], None] | None = None) -> None:
        import ipywidgets as w

        self.on_use = on_use
        self.provider = w.Dropdown(options=list(KEY_ENV), value="anthropic", description="Provider")
        self.model = w.Combobox(description="Model", ensure_option=False,
                                placeholder="a model from the list, or the name your server knows")
        self.base_url = w.Text(description="Base URL", placeholder="empty: the provider; or e.g. http://localhost:8080/v1")
        self.key = w.Password(description="API key")
        self.test_button = w.Button(description="Test", tooltip="One streamed completion and one request with a tool schema")
        self.use_button = w.Button(description="Use this model", tooltip="Make it the session's model (%agent model)")
        self.verdicts = w.HTML()
        self.widget = w.VBox([self.provider, self.model, self.base_url, self.key,
                              w.HBox([self.test_button, self.use_button]), self.verdicts])
        self.provider.observe(lambda _change: self._provider_changed(), names="value")
        self._provider_changed()
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        self.test_button.on_click(lambda _b: self._run(self.test()))
        self.use_button.on_click(lambda _b: self.use())

    @property
    def spec(self) -> str:
        """The chosen model as a model string, e.g. ``anthropic:claude-sonnet-4-6``."""
        name = self.model.value.strip() or DEFAULT_MODELS[self.provider.value]
        return f"{self.provider.value}:{name}"

    def apply(self) -> None:
        """Puts the key and the base URL into this process's environment, and empties the key field."""
        provider = self.provider.value
        if self.key.value:
            os.environ[KEY_ENV[provider]] = self.key.value
            self.key.value = ""  # nothing of the key stays in the widget (or in saved widget state)
        url = self.base_url.value.strip()
        if url:
            os.environ[BASE_URL_ENV[provider]] = url
        else:
            os.environ.pop(BASE_URL_ENV[provider], None)
        self._key_hint()

    def build_model(self) -> Model:
        """The chosen model, with the key and base URL applied."""
        self.apply()
        url = self.base_url.value.strip()
        return resolve_model(self.spec, **({"base_url": url} if url else {}))

    async def test(self) -> list[EndpointVerdict]:
        """Checks the endpoint for real and shows the verdicts (the Test button)."""
        self.verdicts.value = f"<i>Testing {html.escape(self.spec)}…</i>"
        try:
            model = self.build_model()
        except UserError as exc:
            found = [EndpointVerdict("setup", False, str(exc))]
        else:
            found = await check_endpoint(model)
        self.verdicts.value = "".join(
            f'<div class="ak-setup-verdict" data-ok="{str(v.ok).lower()}">{"✓" if v.ok else "✗"} '
            f"<b>{html.escape(v.check)}</b>: {html.escape(v.message)}</div>" for v in found)
        return found

    def use(self) -> None:
        """Makes the chosen model the session's (the "Use this model" button)."""
        self.apply()
        if self.on_use is not None:
            self.on_use(self.spec)

    def _provider_changed(self) -> None:
        provider = self.provider.value
        self.model.options = tuple(CONTEXT_WINDOWS.get(provider, {}))
        self.model.value = DEFAULT_MODELS[provider]
        self._key_hint()

    def _key_hint(self) -> None:
        env = KEY_ENV[self.provider.value]
        self.key.placeholder = (f"set in {env} for this kernel; type a new one to replace it" if os.environ.get(env)
                                else f"kept in {env} for this kernel only, never in the notebook")

    def _run(self, coro: Any) -> None:
        # A click may arrive on a kernel subshell's thread: the check runs on the kernel's loop.
        if self._loop is not None and self._loop.is_running():
            asyncio.run_coroutine_threadsafe(coro, self._loop)
        else:
            asyncio.run(coro)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
