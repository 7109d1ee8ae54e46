"""Small helpers every part may use: encodable text and running a coroutine from sync code."""

#: The package's version (``agent_kernel.__version__``).
VERSION = "0.1.0"
