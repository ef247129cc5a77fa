"""mmasim.arith."""
