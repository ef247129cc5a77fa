"""The ``mmasim`` command: its parser and one handler per subcommand (``main.py``), and
``mmasim warmup`` (``warmup.py``).

The top layer: may import every package; nothing imports it but ``mmasim.__main__``.
"""
