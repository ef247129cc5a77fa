"""The ``mmasim`` command line."""

from __future__ import annotations

import argparse
import sys


from . import MMA, architectures, get_registry
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
    from .display import value_text

    return value_text(model, operand, word)


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


def cmd_validate(args) -> int:
    import json

    from . import validate as v

    progress = None
    if not args.quiet:
        tty = sys.stderr.isatty()

        def progress(i, n, path):
            if tty:
                print(f"\rvalidating [{i}/{n}] {str(path)[-60:]:60s}", end="", file=sys.stderr, flush=True)
            elif i == 1 or i == n or i % 50 == 0:
                print(f"validating [{i}/{n}] {path}", file=sys.stderr, flush=True)

    results = v.validate(args.paths or None, show=args.show, progress=progress)
    if progress is not None and sys.stderr.isatty():
        print("\r" + " " * 80 + "\r", end="", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(v.to_json(results), indent=2))
    else:
        print(v.report(results, show_ok=not args.failures_only))
    return 0 if v.summary(results)["ok"] else 1


def cmd_compare(args) -> int:
    from . import compare as cmp

    q = _qualifiers(args)
    ma = MMA(args.arch_a, args.instruction, **q)
    mb = MMA(args.arch_b, args.instruction_b or args.instruction, **q)
    result = cmp.compare(ma, mb, cases=args.cases, seed=args.seed)
    print(cmp.report(result))
    if args.plot:
        try:
            cmp.plot(result, args.plot)
        except ImportError as exc:
            print(f"mmasim: {exc}; no plot written", file=sys.stderr)
            return 3
        print(f"plot written to {args.plot}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mmasim", description="Bit-exact GPU matrix-multiply-accumulate simulator")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("list", help="architectures, or the instructions of one")
    s.add_argument("arch", nargs="?")
    s.set_defaults(func=cmd_list)

    def add_qualifiers(s):
        for key in ("a_type", "b_type", "c_type", "d_type", "scale_type"):
            s.add_argument(f"--{key.replace('_', '-')}", dest=key)
        s.add_argument("--saturate", action="store_true", help="saturating integer datapath")

    def add_instruction(s):
        s.add_argument("arch")
        s.add_argument("instruction")
        add_qualifiers(s)

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

    s = sub.add_parser(
        "validate",
        help="run vector files (default: every bundled one) and compare every word",
        description="Run frozen vector files through the simulator. Exit status 0 when every word matches, "
                    "1 on any mismatch or unreadable/unresolvable file.",
    )
    s.add_argument("paths", nargs="*", metavar="PATH", help="vector files or directories (default: the bundled vectors/)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.add_argument("--show", type=int, default=3, metavar="N", help="mismatching cases shown per file (default 3)")
    s.add_argument("--failures-only", action="store_true", help="list only files with mismatches or errors")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    s.set_defaults(func=cmd_validate)

    s = sub.add_parser(
        "compare",
        help="search for inputs on which two architectures (or two datapaths) differ",
        description="Run INSTRUCTION on ARCH_A and ARCH_B (or INSTRUCTION on ARCH_A against --instruction-b on "
                    "ARCH_B) on random, near-one, cancellation-heavy and adversarial inputs; report how often the "
                    "results differ, the largest difference in ULPs and the smallest differing example.",
    )
    s.add_argument("arch_a")
    s.add_argument("arch_b")
    s.add_argument("instruction")
    s.add_argument("--instruction-b", help="the instruction on ARCH_B (default: INSTRUCTION)")
    s.add_argument("--cases", type=int, default=4096, help="number of generated cases (default 4096)")
    s.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    s.add_argument("--plot", metavar="FILE.png", help="histogram of both errors against the exact result (needs matplotlib)")
    add_qualifiers(s)
    s.set_defaults(func=cmd_compare)
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
