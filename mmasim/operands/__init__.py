"""mmasim.operands."""
