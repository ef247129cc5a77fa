"""The handlers of the ``mmasim`` subcommands, one ``cmd_<command>(args)`` each (``compare`` and
``accuracy`` also take their parser): each reads its parsed arguments, prints text or one JSON
document (:func:`mmasim.cli.output.dump`) and returns the exit status; a usage error or a failure
is raised (:class:`~mmasim.cli.arguments.UsageError`, :class:`~mmasim.cli.arguments.Failure`) for
:func:`mmasim.cli.main.main` to report.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pathlib
import sys
import time

from mmasim import MMA, architectures, get_registry
from mmasim.cli.arguments import Failure, UsageError, qualifiers_of, word_arg, words_arg
from mmasim.cli.output import dump
from mmasim.operands.display import hex_word, number_text, one_line, safe
from mmasim.registry.lookup import offered, resolve_arch


def _can_plot() -> None:
    """matplotlib, asked before a run that ends in a plot (its absence is a failure, exit 1)."""
    from mmasim.compare import pyplot

    try:
        pyplot()
    except ImportError as exc:
        raise Failure(f"{exc}; nothing was run") from None


def _value(model, operand: str, word: int) -> str:
    from mmasim.operands.display import value_text

    return value_text(model, operand, word)


def cmd_list(args) -> int:
    reg = get_registry()
    names = architectures() if args.arch is None else [resolve_arch(reg, args.arch)]
    shown = {name: offered(reg.architectures[name].datapaths) for name in names}   # what MMA() resolves
    if args.json:
        dump({"schema": "mmasim.list/1", "architectures": [{
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
    model = MMA(args.arch, args.instruction, **qualifiers_of(args))
    if not args.json:
        print(safe(model.describe(), newlines=True))
        return 0
    dp, st = model.datapath, model.status
    dump({
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
    model = MMA(args.arch, args.instruction, **qualifiers_of(args))
    a, b = words_arg(args.a, "--a"), words_arg(args.b, "--b")
    c = word_arg(args.c, "--c")
    kw = {}
    if args.scale_a is not None or args.scale_b is not None:
        kw["scale_a"] = words_arg(args.scale_a or "", "--scale-a")
        kw["scale_b"] = words_arg(args.scale_b or "", "--scale-b")
    if args.sparse_metadata is not None:
        kw["sparse_metadata"] = words_arg(args.sparse_metadata, "--sparse-metadata")
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
        dump({"schema": "mmasim.run/1", "arch": model.arch, "instruction": model.instruction,
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
def backend_env(name):
    """``MMASIM_BACKEND`` set to ``name`` (checked first: a BackendError says what is missing)
    for the block; unchanged when ``name`` is None."""
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
        with backend_env(args.backend):
            results = v.validate(args.paths or None, show=args.show, progress=progress)
        done(bar)
    finally:
        if bar is not None:
            bar.close()
    if args.json:
        dump(v.to_json(results))
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
    q = qualifiers_of(args)
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
        dump(cmp.to_json(results, args.cases, args.seed))
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
    results = accuracy_cli.run_studies(args, qualifiers_of(args), parser)
    if args.plot:               # before the results: a plot that fails leaves one document, the error
        plot(results, args.plot)
    accuracy_cli.show(args, results)
    if args.plot and not args.json:
        print(f"plot written to {safe(str(args.plot))}")
    return 0


def cmd_characterize(args) -> int:
    from mmasim import characterize as char
    model = MMA(args.arch, args.instruction, **qualifiers_of(args))
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
        dump({"schema": "mmasim.characterize/1", "source": source, **prop.to_json()})
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
        dump({"schema": "mmasim.harness-generate/1", "arch": arch, "out": str(args.out),
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
    from mmasim.harness.measure import measure
    arch = resolve_arch(get_registry(), args.arch)
    res = measure(arch, args.out, cases=args.cases, probes=args.probes, seed=args.seed,
                  instructions=args.instructions or None, progress=False if args.quiet or args.json else None)
    dev = res["device"]
    if args.json:
        dump({"schema": "mmasim.harness-run/1", "arch": arch, "out": str(args.out), "device": dev,
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
    from mmasim.registry import registration

    records = [{"name": r.name, "source": r.source, "distribution": r.distribution, "entry_point": r.entry_point,
                "ok": bool(r.ok), "error": r.error or "", "available": bool(r.ok) and not r.unavailable,
                "why_unavailable": r.unavailable or ""} for r in registration.status()]
    if args.json:
        dump({"schema": "mmasim.plugins/1", "plugins": records})
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
        raise UsageError("mmasim warmup", "--backend cuda writes the PTX of the CUDA kernels (no GPU is used) and "
                          "needs --ptx DIR; --ptx and --specialised need --backend cuda")
    if not backends.numba_available():
        raise Failure("nothing to compile: the compiled backend needs numba (pip install 'mmasim-exact[fast]')")
    from mmasim.cli import warmup
    from mmasim.backends.numba import cache

    t0 = time.perf_counter()
    if args.backend == "cuda":
        from mmasim.backends.cuda import missing

        if missing():
            raise Failure(f"no CUDA kernel can be compiled: {missing()}")
        results = warmup.cuda_ptx(args.ptx, archs=args.archs or None, specialised=args.specialised,
                                  progress=not args.quiet)
    else:
        results = warmup.warmup(jobs=args.jobs, progress=not args.quiet, archs=args.archs or None)
    seconds = time.perf_counter() - t0
    cpu = sum(r.cpu_seconds for r in results)     # the kernels' compilation (or loading)
    compiled, loaded = sum(r.compiled for r in results), sum(r.loaded for r in results)
    where = str(args.ptx if args.backend == "cuda" else cache.kernel_dir())
    if args.json:
        dump({"schema": "mmasim.warmup/1", "cache": where, "seconds": round(seconds, 3),
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

    model = MMA(args.arch, args.instruction, **qualifiers_of(args))
    lay = model.layout(args.operand, alayout=args.alayout, blayout=args.blayout,
                       **{k: v for k, v in (("byte_id", args.byte_id), ("thread_id", args.thread_id),
                                            ("selector", args.selector),
                                            ("lane_alignment", args.lane_alignment)) if v})
    if args.out:
        try:
            draw.figure(lay, args.out, model.arch, model.instruction)
        except ImportError as exc:
            raise Failure(f"{exc}; no picture written") from None
    if args.json:
        dump({
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
