"""Frozen test vectors (mmasim-vectors v1 files), shipped with mmasim as package data."""
