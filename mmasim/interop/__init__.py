"""mmasim.interop."""
