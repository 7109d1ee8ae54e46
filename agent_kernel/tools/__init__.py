"""tools — @tool, the registry, the streaming executor and the built-in tools."""
