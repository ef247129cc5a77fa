"""The ``mmasim`` command line."""

from __future__ import annotations

import argparse
import sys

import numpy as np

from . import MMA, architectures, get_registry, instructions
from .errors import MMAError
from .lookup import resolve_arch


def _int_word(text: str) -> int:
    try:
        return int(text, 0) if text.lower().startswith(("0x", "0b", "0o")) else int(text, 16)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a hex word: {text!r}") from None


def _words(text: str) -> list:
    return [_int_word(t) for t in text.replace(",", " ").split()]


def _value(model, operand: str, word: int) -> str:
    dec = model.decode(operand, np.array([word], dtype=np.uint64))
    cls = int(dec.cls[0])
    sign = "-" if int(dec.sign[0]) else ""
    if cls == 3:
        return "nan"
    if cls == 2:
        return f"{sign}inf"
    if cls == 0:
        return f"{sign}0"
    m, q = int(dec.m[0]), int(dec.q[0])
    if getattr(model, f"{operand}_format").integer:
        return f"{sign}{m}"
    value = float(m) * 2.0 ** q if -1000 < q < 1000 else None
    exact = f"{sign}{m}*2^{q}"
    return f"{sign}{value!r} ({exact})" if value is not None else exact


def cmd_list(args) -> int:
    reg = get_registry()
    if args.arch is None:
        for name in architectures():
            arch = reg.architectures[name]
            print(f"{name:16s} {len(arch.datapaths):4d} datapaths  {arch.description}")
            if arch.aliases:
                print(f"{'':16s} aliases: {', '.join(arch.aliases)}")
        return 0
    name = resolve_arch(reg, args.arch)
    arch = reg.architectures[name]
    print(f"{name}: {arch.description}")
    for dp in arch.datapaths:
        print(f"  {dp.canonical(reg.formats):70s} {dp.status.kind}")
    return 0


def cmd_explain(args) -> int:
    print(MMA(args.arch, args.instruction, **_qualifiers(args)).describe())
    return 0


def _qualifiers(args) -> dict:
    q = {}
    for key in ("a_type", "b_type", "c_type", "d_type", "scale_type"):
        if getattr(args, key, None):
            q[key] = getattr(args, key)
    if getattr(args, "saturate", False):
        q["saturate"] = True
    return q


def cmd_run(args) -> int:
    model = MMA(args.arch, args.instruction, **_qualifiers(args))
    a, b = _words(args.a), _words(args.b)
    c = _int_word(args.c)
    kw = {}
    if args.scale_a is not None or args.scale_b is not None:
        kw["scale_a"] = _words(args.scale_a or "")
        kw["scale_b"] = _words(args.scale_b or "")
    if args.sparse_metadata is not None:
        kw["sparse_metadata"] = _words(args.sparse_metadata)
    d = int(model.dot(a, b, c, **kw))
    width = model.encoding.word_bits // 4
    print(f"{model.arch}: {model.instruction}")
    print(f"D = 0x{d:0{width}X}  {_value(model, 'd', d)}")
    if args.verbose:
        for name, ws in (("a", a), ("b", b)):
            print(f"{name} = " + ", ".join(f"0x{w:X} ({_value(model, name, w)})" for w in ws))
        print(f"c = 0x{c:X} ({_value(model, 'c', c)})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mmasim", description="Bit-exact GPU matrix-multiply-accumulate simulator")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("list", help="architectures, or the instructions of one")
    s.add_argument("arch", nargs="?")
    s.set_defaults(func=cmd_list)

    def add_instruction(s):
        s.add_argument("arch")
        s.add_argument("instruction")
        for key in ("a_type", "b_type", "c_type", "d_type", "scale_type"):
            s.add_argument(f"--{key.replace('_', '-')}", dest=key)
        s.add_argument("--saturate", action="store_true", help="saturating integer datapath")

    s = sub.add_parser("explain", help="composition, parameters and validation status of a datapath")
    add_instruction(s)
    s.set_defaults(func=cmd_explain)

    s = sub.add_parser("run", help="one dot product on hex container words")
    add_instruction(s)
    s.add_argument("--a", required=True, help="K hex words of A, separated by spaces or commas")
    s.add_argument("--b", required=True, help="K hex words of B")
    s.add_argument("--c", required=True, help="the hex word of C")
    s.add_argument("--scale-a", help="hex scale words of A (block-scaled kinds)")
    s.add_argument("--scale-b", help="hex scale words of B")
    s.add_argument("--sparse-metadata", help="hex 32-bit metadata words (sparse kinds)")
    s.add_argument("-v", "--verbose", action="store_true", help="also decode every operand")
    s.set_defaults(func=cmd_run)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except MMAError as exc:
        print(f"mmasim: error: {exc}", file=sys.stderr)
        return 2
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))
    except BrokenPipeError:  # pragma: no cover
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
