"""``mmasim accuracy``: the parser of the command and what it prints (a table per setting,
or one JSON document, schema ``mmasim.accuracy/1``; an optional plot)."""

from __future__ import annotations

import argparse
import json

from mmasim.operands.display import safe
from mmasim.accuracy import DEFAULT_K
from mmasim.accuracy.inputs import DISTRIBUTIONS


def _counts(count, what: str, none: bool = False):
    """A comma-separated list of counts, each read by ``count`` (the command line's one count
    rule: ASCII decimal digits) and at least 1; with ``none``, ``none`` or 0 stand for None."""
    one = count(0 if none else 1, what)

    def parse(text: str):
        out = []
        for token in text.split(","):
            token = token.strip(" ")
            if none and token.isascii() and token.lower() == "none":
                out.append(None)
            elif not token:
                raise argparse.ArgumentTypeError(f"an empty value in {text!r}; give comma-separated counts "
                                                 "(decimal digits), e.g. 256,1024")
            else:
                value = one(token)
                out.append(None if value == 0 else value)
        return out

    parse.__name__ = what
    return parse


def add_parser(sub, add_qualifiers, add_json, plot_path, count):
    """Add the ``accuracy`` subcommand to ``sub``; returns its parser."""
    s = sub.add_parser(
        "accuracy", help="error of whole GEMMs against the exact result, per K (docs/accuracy.md)",
        usage="mmasim accuracy [options] ARCH INSTRUCTION [ARCH INSTRUCTION ...]",
        description="Random GEMMs from a stated distribution, cast (RNE, saturating) to the instruction's formats "
                    "or quantized by --scheme, run as mmasim.gemm runs them (with --promote-every / --split-k), "
                    "and compared with the exact result computed in integers. Per K: the largest and median "
                    "relative error, the error in ULPs of the output, the share of exact outputs and the "
                    "effective bits of the median output. Several ARCH INSTRUCTION pairs and several "
                    "--promote-every values are compared on the same inputs.")
    s.add_argument("pairs", nargs="+", metavar="ARCH INSTRUCTION", help="one or more architecture / instruction pairs")
    s.add_argument("--k", type=_counts(count, "--k"), default=list(DEFAULT_K),
                   help="K values, comma-separated (default 256,1024,4096,16384)")
    s.add_argument("--m", type=count(1, "--m"), help="rows of outputs (default: at least 64, whole instruction tiles)")
    s.add_argument("--n", type=count(1, "--n"), help="columns of outputs (default: at least 64)")
    s.add_argument("--promote-every", type=_counts(count, "--promote-every", none=True), default=[None],
                   help="promotion interval(s) in K elements, comma-separated; 'none' (or 0) for none "
                        "(default none); each value is a setting of its own")
    s.add_argument("--split-k", type=count(1, "--split-k"), help="split-K slices (default: none)")
    s.add_argument("--split-reduce", choices=("sequential", "tree"), default="sequential",
                   help="how split-K slices are reduced (default sequential)")
    s.add_argument("--scheme", help="quantize the inputs with this mmasim.quantize scheme instead of plain casts")
    s.add_argument("--dist", choices=tuple(DISTRIBUTIONS), default="uniform",
                   help="input distribution: " + "; ".join(f"{k}: {v}" for k, v in DISTRIBUTIONS.items())
                        + " (default uniform)")
    s.add_argument("--seed", type=count(0, "--seed"), default=0, help="random seed (default 0)")
    s.add_argument("--plot", metavar="FILE.png", type=plot_path,
                   help="relative error against K, one line per setting (needs matplotlib)")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    add_qualifiers(s)
    add_json(s)
    return s


def run_studies(args, qualifiers: dict, parser) -> list:
    """Run the studies; returns the :class:`~mmasim.accuracy.Accuracy` results (:func:`show` prints them)."""
    from mmasim.accuracy import studies

    if len(args.pairs) % 2:
        parser.error("accuracy takes ARCH INSTRUCTION pairs: an even number of positional arguments")
    pairs = list(zip(args.pairs[0::2], args.pairs[1::2]))
    settings = [dict(arch=arch, instruction=instr, promote_every=p, split_k=args.split_k,
                     split_reduce=args.split_reduce, scheme=args.scheme, **qualifiers)
                for arch, instr in pairs for p in args.promote_every]
    return studies(settings, args.k, m=args.m, n=args.n, dist=args.dist, seed=args.seed,
                   progress=False if args.quiet or args.json else None)


def show(args, results) -> None:
    """Print ``results``: a table per setting, or one JSON document (``mmasim.accuracy/1``)."""
    if args.json:
        print(json.dumps({"schema": "mmasim.accuracy/1", "dist": args.dist, "seed": args.seed, "k": args.k,
                          "settings": [r.to_json() for r in results]}, indent=2))
    else:
        print("\n\n".join(safe(r.table(), newlines=True) for r in results))


__all__ = ["add_parser", "run_studies", "show"]
