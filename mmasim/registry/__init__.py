"""mmasim.registry.build."""
