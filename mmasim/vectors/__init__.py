"""mmasim.vectors.files."""
