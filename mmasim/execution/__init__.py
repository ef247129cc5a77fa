"""mmasim.execution."""
