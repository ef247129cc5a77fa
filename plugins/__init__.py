"""Built-in architecture plugins, registered exactly like third-party ones."""
