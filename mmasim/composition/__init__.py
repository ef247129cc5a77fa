"""mmasim.composition."""
