"""Architecture tables (TOML), shipped as package data."""
