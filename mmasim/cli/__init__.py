"""mmasim.cli.main."""
