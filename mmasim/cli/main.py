"""The ``mmasim`` command line.

Exit status: 0 success; 1 a failure (an :class:`mmasim.MMAError`, an
``OSError``, a vector file that does not validate, a plugin that failed to
load, output that could not be written: :mod:`mmasim.cli.output`); 2 a usage
error (argparse; an unknown option is named by its command).  Every message is one line on stderr,
``mmasim: error: ...``; text that came from outside (vector files, tables,
plugins, paths, arguments) is printed with control characters escaped
(:func:`mmasim.operands.display.safe`).  ``--json`` prints one JSON document on stdout
(schemas ``mmasim.<command>/1``, docs/user-guide.md "JSON output").
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import pathlib
import sys
import time

from mmasim import DISTRIBUTION, MMA, architectures, get_registry
from mmasim.cli import output
from mmasim.operands.display import hex_word, number_text, one_line, safe
from mmasim.errors import MMAError, WordSyntaxError
from mmasim.registry.lookup import offered, resolve_arch
from mmasim.operands.text import parse_count, parse_words


class _UsageError(Exception):
    """A usage error of the command ``prog`` (exit status 2)."""

    def __init__(self, prog: str, message):
        super().__init__(one_line(message))
        self.prog = prog


class _Failure(Exception):
    """A failure a command reports (exit status 1), such as an optional dependency it lacks."""


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors reach :func:`main`, which prints them as one line,
    ``mmasim compare: error: ...`` (and under ``--json`` as a JSON document too)."""

    def error(self, message):
        raise _UsageError(self.prog, message)


def _version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version(DISTRIBUTION)
        except PackageNotFoundError:
            pass
    except ImportError:  # pragma: no cover
        pass
    from mmasim import __version__

    return __version__


def _dump(doc) -> None:
    print(json.dumps(doc, indent=2, default=str))


# ------------------------------------------------------------ argument types
def _words(text: str, what: str) -> list:
    """Hex words separated by spaces or commas (:func:`mmasim.operands.text.parse_words`); a bad one is a
    usage error."""
    try:
        return parse_words(text, what)
    except WordSyntaxError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _word(text: str, what: str) -> int:
    words = _words(text, what)
    if len(words) != 1:
        raise argparse.ArgumentTypeError(f"{what}: one hex word, not {text!r}")
    return words[0]


#: the longest count option value read (2**64 has 20 digits)
MAX_COUNT_CHARS = 40


def _count(minimum: int, what: str):
    def parse(text: str) -> int:
        if len(text) > MAX_COUNT_CHARS:       # no count is that long (and int() refuses 4,300+ digits)
            raise argparse.ArgumentTypeError(f"must be an integer of at most {MAX_COUNT_CHARS} decimal digits, "
                                             f"not a value of {len(text):,} characters ({text[:12]}...)")
        value = parse_count(text)
        if value is None:
            if text.startswith("-") and parse_count(text[1:]) is not None:
                raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {text}")
            raise argparse.ArgumentTypeError(f"must be an integer (decimal digits), not {text!r}")
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
        return value

    parse.__name__ = what
    return parse


def _plot_path(text: str) -> pathlib.Path:
    from mmasim.compare import PLOT_TYPES

    path = pathlib.Path(text)
    ext = path.suffix.lower().lstrip(".")
    if ext not in PLOT_TYPES:
        raise argparse.ArgumentTypeError(
            f"cannot tell the image type of {text!r}: the file name must end in one of "
            + ", ".join("." + t for t in PLOT_TYPES))
    folder = path.parent if str(path.parent) else pathlib.Path(".")
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: no folder {str(folder)!r}")
    if path.is_dir() or text.endswith(("/", os.sep)):
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: it is a folder; name an image file in it")
    if not os.access(path if path.exists() else folder, os.W_OK):
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: permission denied")
    return path


def _path(kind: str):
    """A path option (``kind``: ``"folder"`` for ``--out``, ``"file"``): any path but the empty
    one, which pathlib would silently read as the working folder."""
    def parse(text: str) -> pathlib.Path:
        if not text:
            raise argparse.ArgumentTypeError(f"the empty path; name the {kind}"
                                             + (" ('.' for the working folder)" if kind == "folder" else ""))
        return pathlib.Path(text)

    parse.__name__ = kind
    return parse


def _can_plot() -> None:
    """matplotlib, asked before a run that ends in a plot (its absence is a failure, exit 1)."""
    from mmasim.compare import pyplot

    try:
        pyplot()
    except ImportError as exc:
        raise _Failure(f"{exc}; nothing was run") from None


def _value(model, operand: str, word: int) -> str:
    from mmasim.operands.display import value_text

    return value_text(model, operand, word)


def _qualifiers(args) -> dict:
    q = {}
    for key in ("a_type", "b_type", "c_type", "d_type", "scale_type"):
        if getattr(args, key, None):
            q[key] = getattr(args, key)
    if getattr(args, "saturate", False):
        q["saturate"] = True
    return q


# ------------------------------------------------------------------ commands
def cmd_list(args) -> int:
    reg = get_registry()
    names = architectures() if args.arch is None else [resolve_arch(reg, args.arch)]
    shown = {name: offered(reg.architectures[name].datapaths) for name in names}   # what MMA() resolves
    if args.json:
        _dump({"schema": "mmasim.list/1", "architectures": [{
            "name": name,
            "vendor": reg.architectures[name].vendor,
            "description": reg.architectures[name].description,
            "aliases": list(reg.architectures[name].aliases),
            "datapaths": [{"instruction": dp.canonical(reg.formats), "status": dp.status.kind}
                          for dp in shown[name]],
        } for name in names]})
        return 0
    if args.arch is None:
        for name in names:
            arch = reg.architectures[name]
            print(f"{safe(name):16s} {len(shown[name]):4d} datapaths  {safe(arch.description)}")
            if arch.aliases:
                print(f"{'':16s} aliases: {safe(', '.join(arch.aliases))}")
        return 0
    arch = reg.architectures[names[0]]
    print(f"{safe(names[0])}: {safe(arch.description)}")
    for dp in shown[names[0]]:
        print(f"  {safe(dp.canonical(reg.formats)):70s} {safe(dp.status.kind)}")
    return 0


def _format_json(fmt) -> dict:
    return {"name": fmt.name, "container_bits": fmt.container_bits, "description": fmt.describe()}


def cmd_explain(args) -> int:
    model = MMA(args.arch, args.instruction, **_qualifiers(args))
    if not args.json:
        print(safe(model.describe(), newlines=True))
        return 0
    dp, st = model.datapath, model.status
    _dump({
        "schema": "mmasim.explain/1",
        "arch": model.arch,
        "instruction": model.instruction,
        "formats": {op: _format_json(getattr(model, f"{op}_format")) for op in ("a", "b", "c", "d")},
        "scale": None if model.scale_format is None else {
            "format": _format_json(model.scale_format), "block": dp.block, "scale_vec": dp.scale_vec},
        "k": dp.k,
        "stored_k": dp.stored_k,
        "sparse": dp.sparse,
        "accumulator": dp.accumulator,
        "parameters": dp.parameters,
        "elements_per_step": dp.step,
        "rounding": model.encoding.key,
        "m": list(dp.m),
        "n": list(dp.n),
        "status": {"kind": st.kind, "evidence": st.evidence, "device": st.device, "cases": st.cases,
                   "source": st.source},
        "notes": dp.notes,
        "text": model.describe(),
    })
    return 0


def cmd_run(args) -> int:
    model = MMA(args.arch, args.instruction, **_qualifiers(args))
    a, b = _words(args.a, "--a"), _words(args.b, "--b")
    c = _word(args.c, "--c")
    kw = {}
    if args.scale_a is not None or args.scale_b is not None:
        kw["scale_a"] = _words(args.scale_a or "", "--scale-a")
        kw["scale_b"] = _words(args.scale_b or "", "--scale-b")
    if args.sparse_metadata is not None:
        kw["sparse_metadata"] = _words(args.sparse_metadata, "--sparse-metadata")
    d = int(model.dot(a, b, c, **kw))
    bits = model.encoding.word_bits
    if args.json:
        def entries(op, ws):
            return [{"word": hex_word(w, getattr(model, f"{op}_format").container_bits), "value": _value(model, op, w)}
                    for w in ws]

        inputs = {"a": entries("a", a), "b": entries("b", b), "c": entries("c", [c])[0]}
        if "scale_a" in kw:
            inputs["scale_a"] = entries("scale", kw["scale_a"])
            inputs["scale_b"] = entries("scale", kw["scale_b"])
        if "sparse_metadata" in kw:
            inputs["sparse_metadata"] = [hex_word(w, 32) for w in kw["sparse_metadata"]]
        _dump({"schema": "mmasim.run/1", "arch": model.arch, "instruction": model.instruction,
               "status": model.status.kind, "inputs": inputs,
               "d": {"word": hex_word(d, bits), "value": _value(model, "d", d)}})
        return 0
    print(f"{safe(model.arch)}: {safe(model.instruction)}")
    print(f"D = {hex_word(d, bits)}  {_value(model, 'd', d)}")
    if args.verbose:
        for name, ws in (("a", a), ("b", b)):
            print(f"{name} = " + ", ".join(f"0x{w:X} ({_value(model, name, w)})" for w in ws))
        print(f"c = 0x{c:X} ({_value(model, 'c', c)})")
    return 0


@contextlib.contextmanager
def _backend_env(name):
    """``MMASIM_BACKEND`` set to ``name`` (checked: a BackendError says what is missing) for the
    block; unchanged when ``name`` is None."""
    from mmasim import backends

    if name is None:
        yield
        return
    backends.resolve(name)
    saved = os.environ.get(backends.ENV)
    os.environ[backends.ENV] = name
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(backends.ENV, None)
        else:
            os.environ[backends.ENV] = saved


def cmd_validate(args) -> int:
    from mmasim.vectors import validate as v
    from mmasim.execution.progress import bar as progress_bar, doing, done

    for path in args.paths:             # a mistyped path is an error, not a report with an error row
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, "no such file or directory", path or "''")
    bar = None
    show = False if args.quiet or args.json else None   # a bar on a terminal only, never under --json

    def progress(i, n, path):
        nonlocal bar
        if i == 1:
            bar = progress_bar(n, "mmasim validate", " file", show)
        else:
            done(bar)
        doing(bar, safe(str(path))[-48:])

    try:
        with _backend_env(args.backend):
            results = v.validate(args.paths or None, show=args.show, progress=progress)
        done(bar)
    finally:
        if bar is not None:
            bar.close()
    if args.json:
        _dump(v.to_json(results))
    else:
        print(v.report(results, show_ok=not args.failures_only))
    s = v.summary(results)
    if s["no_vectors"]:
        where = ", ".join(args.paths) if args.paths else "the bundled vectors"
        print(f"mmasim: error: no vectors found in {safe(where)}", file=sys.stderr)
    return 0 if s["ok"] else 1


def cmd_compare(args, parser) -> int:
    from mmasim import compare as cmp
    from mmasim.execution.progress import bar as progress_bar

    names = list(args.archs)
    instruction = names.pop()
    if not names or (len(names) == 1 and not args.instruction_b):
        parser.error("compare needs two or more architectures (or one with --instruction-b)")
    if args.plot:
        _can_plot()
    q = _qualifiers(args)
    models = [MMA(names[0], instruction, **q)]
    others = names[1:] or names[:1]
    models += [MMA(name, args.instruction_b or instruction, **q) for name in others]
    if args.plot:
        cmp.check_plottable(models[0])
    steps = cmp.STEPS * len(others) + (cmp.plot_steps(len(others)) if args.plot else 0)
    bar = progress_bar(steps, "mmasim compare", " step", False if args.json else None)
    try:
        results = cmp.compare_many(models, cases=args.cases, seed=args.seed, bar=bar)
        if args.plot:
            cmp.plot(results, args.plot, bar=bar)
    finally:
        if bar is not None:
            bar.close()
    if args.json:
        _dump(cmp.to_json(results, args.cases, args.seed))
        return 0
    print("\n\n".join(safe(cmp.report(r), newlines=True) for r in results))
    if len(results) > 1:
        print(f"\nsummary: each against {safe(models[0].arch)} {safe(models[0].instruction)}, "
              f"{args.cases:,} cases, seed {args.seed}")
        for r in results:
            mx = r.max_ulps
            print(f"  {safe(r.model_b.arch):16s} differs in {r.count:6,} cases"
                  + (f"; largest {number_text(mx)} {r.unit}" if mx is not None else ""))
    if args.plot:
        print(f"plot written to {safe(args.plot)}")
    return 0


def cmd_accuracy(args, parser) -> int:
    from mmasim.accuracy import cli as accuracy_cli
    from mmasim.accuracy.plot import plot

    if args.plot:
        _can_plot()
    results = accuracy_cli.run(args, _qualifiers(args), parser)
    if args.plot:               # before the results: a plot that fails leaves one document, the error
        plot(results, args.plot)
    accuracy_cli.show(args, results)
    if args.plot and not args.json:
        print(f"plot written to {safe(str(args.plot))}")
    return 0


def cmd_characterize(args) -> int:
    from mmasim import characterize as char
    model = MMA(args.arch, args.instruction, **_qualifiers(args))
    if args.from_vectors is not None:
        from mmasim.vectors import files as vectors
        vf = vectors.load(args.from_vectors)
        theirs = vectors.model_for(vf)
        if theirs.datapath != model.datapath:
            raise char.CharacterizeError(f"{args.from_vectors}: its cases are for {theirs.arch}: {theirs.instruction}, "
                           f"not {model.arch}: {model.instruction}")
        prop = char.from_vectors(model, vf)
        source = f"device words from {args.from_vectors}"
    else:
        prop = char.characterize(model)
        source = "simulated words (the table's datapath, as a check of the method)"
    if args.json:
        _dump({"schema": "mmasim.characterize/1", "source": source, **prop.to_json()})
    else:
        print(f"# probes: {source}")
        print(safe(prop.toml(), newlines=True), end="")
        for family, why in prop.rejected:
            print(f"# tried {family}: {safe(why)}")
    return 0 if prop.consistent else 1


def _skipped_json(pairs) -> list:
    return [{"instruction": ins, "reason": why} for ins, why in pairs]


def cmd_harness_generate(args) -> int:
    from mmasim.harness.generate import generate
    arch = resolve_arch(get_registry(), args.arch)
    res = generate(arch, args.instructions or None, args.out)
    if args.json:
        _dump({"schema": "mmasim.harness-generate/1", "arch": arch, "out": str(args.out),
               "build": str(pathlib.Path(args.out) / "build.sh"),
               "kernels": [{"instruction": spec.instruction, "kernel": spec.name, "target": spec.target,
                            "source": path} for spec, path in res.kernels],
               "skipped": _skipped_json(res.skipped)})
        return 0
    print(f"{len(res.kernels)} kernel(s) of {arch} written to {safe(str(args.out))} (build: {safe(str(args.out))}/build.sh)")
    for ins, why in res.skipped:
        print(f"  {safe(ins)}: {safe(one_line(why))}")
    return 0


def cmd_harness_run(args) -> int:
    from mmasim.harness.run import run
    arch = resolve_arch(get_registry(), args.arch)
    res = run(arch, args.out, cases=args.cases, probes=args.probes, seed=args.seed,
              instructions=args.instructions or None, progress=False if args.quiet or args.json else None)
    dev = res["device"]
    if args.json:
        _dump({"schema": "mmasim.harness-run/1", "arch": arch, "out": str(args.out), "device": dev,
               "written": list(res["written"]), "skipped": _skipped_json(res["skipped"]),
               "unprobed": _skipped_json(res.get("unprobed", []))})
        return 0
    print(f"{len(res['written'])} vector file(s) from {safe(dev.get('name', '?'))} "
          f"(compute capability {safe(dev.get('compute_capability', '?'))}) written to {safe(str(args.out))}; "
          f"check them with: mmasim validate {safe(str(args.out))}")
    for ins, why in res["skipped"] + res.get("unprobed", []):
        print(f"  {safe(ins)}: {safe(one_line(why))}")
    return 0


def cmd_plugins(args) -> int:
    from mmasim.registry import plugins

    records = [{"name": r.name, "source": r.source, "distribution": r.distribution, "entry_point": r.entry_point,
                "ok": bool(r.ok), "error": r.error or "", "available": bool(r.ok) and not r.unavailable,
                "why_unavailable": r.unavailable or ""} for r in plugins.status()]
    if args.json:
        _dump({"schema": "mmasim.plugins/1", "plugins": records})
    else:
        w = max([len(safe(r["name"])) for r in records] + [6])
        for r in records:
            where = r["source"] + (f", {r['distribution']}" if r["distribution"] else "")
            state = (f"FAILED: {one_line(r['error'])}" if not r["ok"] else
                     f"unavailable: {one_line(r['why_unavailable'])}" if not r["available"] else "ok")
            print(f"{safe(r['name']):{w}s}  {safe(where):32s}  {safe(state)}")
        bad = sum(1 for r in records if not r["ok"])
        off = sum(1 for r in records if r["ok"] and not r["available"])
        print(f"{len(records)} plugins, {bad} failed" + (f", {off} unavailable" if off else ""))
    return 0 if all(r["ok"] for r in records) else 1


def cmd_warmup(args) -> int:
    from mmasim import backends

    if (args.backend == "cuda") != (args.ptx is not None) or (args.specialised and args.ptx is None):
        raise _UsageError("mmasim warmup", "--backend cuda writes the PTX of the CUDA kernels (no GPU is used) and "
                          "needs --ptx DIR; --ptx and --specialised need --backend cuda")
    if not backends.numba_available():
        raise _Failure("nothing to compile: the compiled backend needs numba (pip install 'mmasim-exact[fast]')")
    from mmasim.cli import warmup
    from mmasim.backends.numba import cache

    t0 = time.perf_counter()
    if args.backend == "cuda":
        from mmasim.backends.cuda import missing

        if missing():
            raise _Failure(f"no CUDA kernel can be compiled: {missing()}")
        results = warmup.cuda_ptx(args.ptx, archs=args.archs or None, specialised=args.specialised,
                                  progress=not args.quiet)
    else:
        results = warmup.warmup(jobs=args.jobs, progress=not args.quiet, archs=args.archs or None)
    seconds = time.perf_counter() - t0
    cpu = sum(r.cpu_seconds for r in results)     # the kernels' compilation (or loading)
    compiled, loaded = sum(r.compiled for r in results), sum(r.loaded for r in results)
    where = str(args.ptx if args.backend == "cuda" else cache.kernel_dir())
    if args.json:
        _dump({"schema": "mmasim.warmup/1", "cache": where, "seconds": round(seconds, 3),
               "cpu_seconds": round(cpu, 3),
               "kernels": [{"kernel": r.label, "seconds": round(r.seconds, 3), "cpu_seconds": round(r.cpu_seconds, 3),
                            "compiled": r.compiled, "loaded": r.loaded} for r in sorted(results, key=lambda r: r.label)]})
    elif args.backend == "cuda":
        print(f"{len(results)} CUDA kernels in {seconds:.1f} s: {compiled} PTX files (sm_80, sm_90a, sm_100a) "
              f"written to {safe(where)}")
    else:
        print(f"{len(results)} kernel signatures in {seconds:.1f} s ({cpu:.1f} s CPU): {compiled} compiled, "
              f"{loaded} loaded from the cache ({safe(where)})")
    return 0


def cmd_layout(args) -> int:
    from mmasim.placement import draw

    model = MMA(args.arch, args.instruction, **_qualifiers(args))
    lay = model.layout(args.operand, alayout=args.alayout, blayout=args.blayout,
                       **{k: v for k, v in (("byte_id", args.byte_id), ("thread_id", args.thread_id),
                                            ("selector", args.selector),
                                            ("lane_alignment", args.lane_alignment)) if v})
    if args.out:
        try:
            draw.figure(lay, args.out, model.arch, model.instruction)
        except ImportError as exc:
            raise _Failure(f"{exc}; no picture written") from None
    if args.json:
        _dump({
            "schema": "mmasim.layout/1",
            "arch": model.arch,
            "instruction": model.instruction,
            "operand": args.operand,
            "rule": lay.name,
            "storage": lay.storage,
            "lanes": lay.lanes,
            "registers": lay.registers,
            "elements": lay.elements,
            "element_bits": lay.bits,
            "rows": lay.rows,
            "cols": lay.cols,
            "blocks": lay.blocks,
            "selectors": lay.selectors,
            "source": lay.rule.source,
            "evidence": lay.evidence,
            "entries": draw.entries(lay),
        })
    elif args.out:
        print(f"layout written to {safe(args.out)}")
    else:
        print(safe(draw.text(lay, model.arch, model.instruction), newlines=True))
    return 0


# -------------------------------------------------------------------- parser
_ARCH_HELP = "an architecture: a family, a product or sm_XX, as mmasim list prints them"


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="mmasim", description="Bit-exact GPU matrix-multiply-accumulate simulator",
                epilog="Exit status: 0 success, 1 failure, 2 usage error.")
    p.add_argument("--version", action="version", version=f"mmasim {_version()}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def add_json(s):
        s.add_argument("--json", action="store_true", help="one JSON document on stdout (docs/user-guide.md)")

    s = sub.add_parser("list", help="architectures, or the instructions of one")
    s.add_argument("arch", nargs="?", help=_ARCH_HELP + "; without it, every architecture")
    add_json(s)
    s.set_defaults(func=cmd_list)

    def add_qualifiers(s):
        helps = {"a_type": "A's number format, where the instruction string leaves it open: a format name as "
                           "mmasim list ARCH prints it (f16, bf16, tf32, e4m3, e2m1, s8, ...)",
                 "b_type": "B's number format (as --a-type)", "c_type": "C's number format (as --a-type)",
                 "d_type": "D's number format (as --a-type)",
                 "scale_type": "the block scales' format (ue8m0, ue4m3), where the instruction string leaves it open"}
        for key, text in helps.items():
            s.add_argument(f"--{key.replace('_', '-')}", dest=key, metavar="FORMAT", help=text)
        s.add_argument("--saturate", action="store_true", help="saturating integer datapath")

    def add_instruction(s):
        s.add_argument("arch", help=_ARCH_HELP)
        s.add_argument("instruction", help="an instruction string, as mmasim list ARCH prints it or shorter "
                                           "(docs/user-guide.md)")
        add_qualifiers(s)
        add_json(s)

    s = sub.add_parser("explain", help="composition, parameters and validation status of a datapath")
    add_instruction(s)
    s.set_defaults(func=cmd_explain)

    s = sub.add_parser("run", help="one dot product on hex container words")
    add_instruction(s)
    s.add_argument("--a", required=True,
                   help="K hex words of A (hex digits, optionally after 0x), separated by spaces or commas")
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
                    "1 on any mismatch, unreadable/unresolvable file, or when no vectors are found.",
    )
    s.add_argument("paths", nargs="*", metavar="PATH", help="vector files or directories (default: the bundled vectors/)")
    add_json(s)
    s.add_argument("--show", type=_count(0, "--show"), default=3, metavar="N",
                   help="mismatching cases shown per file (default 3)")
    s.add_argument("--failures-only", action="store_true", help="list only files with mismatches or errors")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    s.add_argument("--backend", choices=("auto", "numpy", "numba", "cuda"), default=None,
                   help="the backend that computes the words (default: MMASIM_BACKEND, else auto)")
    s.set_defaults(func=cmd_validate)

    s = sub.add_parser(
        "compare",
        help="search for inputs on which architectures (or two datapaths) differ",
        usage="mmasim compare [options] ARCH [ARCH ...] INSTRUCTION",
        description="Run INSTRUCTION on every ARCH (or INSTRUCTION on the first ARCH against --instruction-b on "
                    "the others; one ARCH with --instruction-b compares two datapaths of it) on random, near-one, "
                    "cancellation-heavy and adversarial inputs. Each architecture after the first is compared "
                    "with the first: how often the results differ, the largest difference in ULPs of the output "
                    "format with the case that has it, and the smallest differing example.",
    )
    s.add_argument("archs", nargs="+", metavar="ARCH ... INSTRUCTION",
                   help="two or more architectures, then the instruction")
    s.add_argument("--instruction-b", help="the instruction on the other architectures (default: INSTRUCTION)")
    s.add_argument("--cases", type=_count(1, "--cases"), default=4096,
                   help="number of generated cases, at least 1 (default 4096)")
    s.add_argument("--seed", type=_count(0, "--seed"), default=0, help="random seed, a non-negative integer (default 0)")
    s.add_argument("--plot", metavar="FILE.png", type=_plot_path,
                   help="bar charts of how far the results are apart and how far each is from the exact result, "
                        "in ULPs (needs matplotlib: the [plot] extra); the type comes from the extension "
                        "(.png, .pdf, .svg, ...)")
    add_qualifiers(s)
    add_json(s)
    s.set_defaults(func=cmd_compare)

    from mmasim.accuracy import cli as accuracy_cli

    s = accuracy_cli.add_parser(sub, add_qualifiers, add_json, _plot_path, _count)
    s.set_defaults(func=cmd_accuracy)

    s = sub.add_parser(
        "layout", help="which lane and register hold each element of an operand (text table or picture)",
        description="The fragment map of an operand as the ISA figures draw it: the matrix, each cell naming "
                    "the lane (thread) and element that hold it (T<lane>:<i>; TMEM: L<lane>:c<column>).")
    add_instruction(s)
    s.add_argument("--operand", choices=("a", "b", "c", "d", "scale_a", "scale_b", "sparse_metadata"), default="a",
                   help="the operand (default a; scale_a / scale_b of block-scaled mma.sync, sparse_metadata "
                        "of mma.sp, whose A is the compressed A)")
    s.add_argument("--byte-id", type=_count(0, "--byte-id"), default=0,
                   help="byte-id selector of scale_a / scale_b (default 0)")
    s.add_argument("--thread-id", type=_count(0, "--thread-id"), default=0,
                   help="thread-id selector of scale_a / scale_b (default 0)")
    s.add_argument("--selector", type=_count(0, "--selector"), default=0,
                   help="sparsity selector of sparse_metadata (default 0)")
    s.add_argument("--lane-alignment", type=_count(0, "--lane-alignment"), default=0,
                   help="TMEM lane alignment (0 or 16) of the half-data-path tcgen05 layouts C and F (default 0)")
    s.add_argument("--alayout", choices=("row", "col"),
                   help="A's .row/.col (mma.sync m8n8k4 .f16; default: the instruction's, else row)")
    s.add_argument("--blayout", choices=("row", "col"),
                   help="B's .row/.col (mma.sync m8n8k4 .f16; default: the instruction's, else col)")
    s.add_argument("--out", metavar="FIG.png", type=_plot_path,
                   help="draw the map into an image (needs matplotlib); the type comes from the extension")
    s.set_defaults(func=cmd_layout)

    s = sub.add_parser(
        "characterize", help="infer a datapath's window parameters from probe ladders (docs/characterize.md)",
        description="Run the fixed probe ladders of docs/characterize.md through the simulator (or read a "
                    "device's words from a vector file written by mmasim harness run --probes) and infer the "
                    "window parameters from the D words alone: a proposed [[datapath]] entry, with the probes "
                    "that decided each parameter. Exit status 0 when the proposal reproduces every probe word, "
                    "1 otherwise.")
    add_instruction(s)
    s.add_argument("--from-vectors", metavar="FILE", type=_path("file"),
                   help="an mmasim-vectors file holding the probe cases and the device's D words "
                        "(mmasim harness run --probes)")
    s.set_defaults(func=cmd_characterize)
    s = sub.add_parser("harness", help="generate, build and run hardware harness kernels (docs/harness.md)",
                       description="CUDA sources that run one instruction on a GPU, and a runner that writes "
                                   "the measured words as vector files for mmasim validate (docs/harness.md).")
    hsub = s.add_subparsers(dest="harness_command", required=True, parser_class=_Parser)
    h = hsub.add_parser("generate", help="one self-contained source per instruction, its spec and build.sh")
    h.add_argument("arch", help=_ARCH_HELP)
    h.add_argument("instructions", nargs="*", metavar="INSTRUCTION",
                   help="instructions (default: every instruction of the architecture)")
    h.add_argument("--out", required=True, type=_path("folder"), help="output folder")
    add_json(h)
    h.set_defaults(func=cmd_harness_generate)
    h = hsub.add_parser("run", help="build with nvcc (hipcc for AMD), run on the GPU, write one vector file per instruction")
    h.add_argument("arch", help=_ARCH_HELP)
    h.add_argument("instructions", nargs="*", metavar="INSTRUCTION",
                   help="instructions (default: every instruction of the architecture)")
    h.add_argument("--out", required=True, type=_path("folder"), help="output folder for the vector files")
    h.add_argument("--cases", type=_count(1, "--cases"), default=100,
                   help="random tiles (instruction executions) per instruction, each M x N dot-product cases "
                        "(default 100)")
    h.add_argument("--probes", action="store_true", help="also run the probe ladders (docs/characterize.md)")
    h.add_argument("--seed", type=_count(0, "--seed"), default=0, help="random seed (default 0)")
    h.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    add_json(h)
    h.set_defaults(func=cmd_harness_run)

    s = sub.add_parser(
        "warmup", help="compile every kernel of the compiled (numba) backend into its cache, once per machine",
        description="Compile (or load from the kernel cache) every kernel signature the registered datapaths use, "
                    "so that later processes load them instead of compiling. The cache folder is $MMASIM_CACHE_DIR, "
                    "else the user cache folder (docs/performance.md).")
    s.add_argument("archs", nargs="*", metavar="ARCH", help="only the kernels of these architectures (default: all)")
    s.add_argument("--jobs", type=_count(1, "--jobs"), default=None,
                   help="processes compiling side by side (default: the CPUs this process may use)")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    s.add_argument("--backend", choices=("numba", "cuda"), default="numba",
                   help="cuda: write the PTX of every CUDA kernel for sm_80, sm_90a and sm_100a into --ptx DIR "
                        "(numba-cuda, no GPU or driver needed) instead of compiling the numba kernels")
    s.add_argument("--ptx", metavar="DIR", default=None, help="the folder of the PTX files (--backend cuda)")
    s.add_argument("--specialised", action="store_true",
                   help="with --backend cuda: one kernel per datapath's constants (far fewer registers) "
                        "instead of the generic kernels")
    add_json(s)
    s.set_defaults(func=cmd_warmup)

    s = sub.add_parser("plugins", help="every plugin with its status (exit 1 when one failed to load)")
    add_json(s)
    s.set_defaults(func=cmd_plugins)

    from mmasim.torch import cli as torch_cli      # mmasim presets: the table imports no torch

    torch_cli.add_parser(sub, add_json)
    return p


def _json_wanted(args, argv) -> bool:
    if args is not None:
        return bool(getattr(args, "json", False))
    return "--json" in (argv[:argv.index("--")] if "--" in argv else argv)


def _command_of(argv) -> str | None:
    """The command words at the start of ``argv`` (``"harness run"``), or None."""
    words, choices = [], _subcommands(build_parser())
    for token in argv:
        if token not in choices:
            break
        words.append(token)
        choices = _subcommands(choices[token])
    return " ".join(words) or None


def _subcommands(parser) -> dict:
    return {name: sub for a in parser._actions if isinstance(a, argparse._SubParsersAction)
            for name, sub in a.choices.items()}


def _error(args, argv, status: int, kind: str, message, prog: str = "mmasim") -> int:
    """Report an error: one line on stderr, ``PROG: error: MESSAGE``; under ``--json`` also
    the ``mmasim.error/1`` document on stdout.  Returns the exit status."""
    message = one_line(message)
    hint = f" (see {prog} --help)" if status == 2 else ""
    print(f"{prog}: error: {message}{hint}", file=sys.stderr)
    if _json_wanted(args, argv):
        if args is not None:
            command = " ".join(x for x in (args.command, getattr(args, "harness_command", None)) if x)
        else:
            command = prog.partition(" ")[2] or _command_of(argv)
        try:
            _dump({"schema": "mmasim.error/1", "command": command, "error": kind, "message": message,
                   "exit_status": status})
        except output.OutputLost as exc:     # the error is said on stderr; the output is gone too
            output.lost(exc, say=False)
    return status


def main(argv=None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); the exit status.  Everything
    it prints goes through :func:`mmasim.cli.output.guard`: a closed pipe or a failed write
    ends it with status 1 (docs/user-guide.md, "Command line")."""
    try:
        with output.guard():
            return _main(sys.argv[1:] if argv is None else [str(a) for a in argv])
    except output.OutputLost as exc:
        return output.lost(exc)


def _main(argv: list) -> int:
    parser = build_parser()
    args = None
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:       # named by the command they were given to (argparse names the top level)
            raise _UsageError(_subparser(parser, args).prog, f"unrecognized arguments: {' '.join(extra)}")
        if args.func in (cmd_compare, cmd_accuracy):
            return args.func(args, _subparser(parser, args))
        return args.func(args)
    except output.OutputLost:
        raise
    except _UsageError as exc:
        return _error(args, argv, 2, "usage", exc, exc.prog)
    except SystemExit as exc:           # --help and --version (0)
        return exc.code if isinstance(exc.code, int) else 2
    except argparse.ArgumentTypeError as exc:   # a value checked after parsing (a word of run)
        return _error(args, argv, 2, "usage", exc, f"mmasim {args.command}")
    except MMAError as exc:
        return _error(args, argv, 1, type(exc).__name__, exc)
    except _Failure as exc:
        return _error(args, argv, 1, "failure", exc)
    except OSError as exc:
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        return _error(args, argv, 1, type(exc).__name__, f"{where}{exc.strerror or exc}")
    except KeyboardInterrupt:  # pragma: no cover
        print("mmasim: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: still one line, and say so
        return _error(args, argv, 1, "internal", f"internal error: {type(exc).__name__}: {exc} (please report this)")


def _subparser(parser, args) -> argparse.ArgumentParser:
    """The parser of the command ``args`` holds (``mmasim harness run``'s for harness run)."""
    for word in (args.command, getattr(args, "harness_command", None)):
        if word is None:
            break
        parser = _subcommands(parser)[word]
    return parser


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
