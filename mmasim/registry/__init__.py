"""The registry: the hook specifications, the plugin manager and its built-ins, the
architecture tables read into datapaths, and the lookup of ``(arch, instruction,
**qualifiers)`` to one datapath.  Every part, the core's own included, enters here
through a hook.

Imports ``mmasim.errors``, ``mmasim.arith``, ``mmasim.accumulators`` and
``mmasim.placement``; ``hookspecs.py`` imports nothing of mmasim.
"""
