"""The ``mmasim`` command: ``main.py`` (parse, dispatch, errors and exit status), ``parser.py``
(the subcommands and their arguments), ``arguments.py`` (argument types, usage errors and
failures), ``commands.py`` (one handler per subcommand), ``output.py`` (where it writes) and
``mmasim warmup`` (``warmup.py``).

The top layer: may import every package; nothing imports it but ``mmasim.__main__``.
"""
