"""agent_kernel."""
