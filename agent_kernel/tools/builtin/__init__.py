"""tools.builtin — file, search, shell and python tools, named by string in ``tools=[...]``."""
