"""``evaluate``: what each emulation does to a model's layers and logits, on one batch.

The model runs once in torch's own arithmetic (the reference) and once per emulation
(:func:`mmasim.torch.emulate`) on the same inputs, under ``torch.no_grad()``.  Forward hooks
(removed afterwards) keep each module's output; per module and emulation the error of the
output against the reference is its relative Frobenius norm ``||y - y_ref|| / ||y_ref||`` and
its SNR ``10 log10(||y_ref||^2 / ||y - y_ref||^2)`` dB (in float64).  The model's output is the
logits (last dimension: the classes): per emulation the mean KL divergence
``KL(softmax(ref) || softmax(emulated))`` over the rows, the rows whose top-1 class changes,
and, with ``targets``, the perplexity ``exp(mean cross entropy)`` (the reference's too).
"""

from __future__ import annotations

import collections.abc
import math

import attrs
import numpy as np

from mmasim.errors import EmulationError
from mmasim.execution.progress import bar, doing, done
from mmasim.torch.emulation import Emulation
from mmasim.torch.function import torch_

#: the version of :meth:`Evaluation.to_json`'s document
SCHEMA = "mmasim.evaluate/1"


@attrs.frozen
class LayerError:
    """One module's output under one emulation against the reference (``snr_db`` ``inf``
    where they are equal, ``rel_fro`` ``nan`` where the reference is zero)."""

    emulation: str
    module: str
    rel_fro: float
    snr_db: float


@attrs.frozen
class LogitStats:
    """The logits under one emulation: mean KL divergence from the reference's softmax, the
    rows whose top-1 class changes (and their share), the perplexity (``None`` without targets),
    the calls the emulation did not emulate."""

    emulation: str
    kl: float
    flips: int
    rows: int
    perplexity: float | None
    not_emulated: int

    @property
    def flip_rate(self) -> float:
        return self.flips / self.rows if self.rows else 0.0


@attrs.frozen
class Evaluation:
    """What :func:`evaluate` found: ``layers`` (:class:`LayerError` per module and emulation),
    ``logits`` (:class:`LogitStats` per emulation), ``reference_perplexity``, ``traces`` (each
    emulation's :class:`~mmasim.torch.trace.Trace`)."""

    emulations: tuple
    modules: tuple
    layers: tuple
    logits: tuple
    reference_perplexity: float | None
    traces: dict = attrs.field(eq=False, repr=False)

    def table(self) -> str:
        """The logits per emulation, then each module's SNR (dB) per emulation."""
        head = ("emulation", "KL", "top-1 flips", "perplexity", "not emulated")
        rows = [("reference (torch)", "0", "0", _num(self.reference_perplexity), "-")]
        rows += [(s.emulation, f"{s.kl:.3g}", f"{s.flips}/{s.rows}", _num(s.perplexity), str(s.not_emulated))
                 for s in self.logits]
        out = _grid(head, rows) + [""]
        snr = {(e.emulation, e.module): e.snr_db for e in self.layers}
        head = ("module (SNR dB)", *self.emulations)
        rows = [(m or "(output)", *(_num(snr[(e, m)], ".1f") for e in self.emulations)) for m in self.modules]
        return "\n".join(out + _grid(head, rows))

    def __str__(self) -> str:
        return self.table()

    def to_json(self) -> dict:
        """The ``mmasim.evaluate/1`` document (docs/torch.md)."""
        def f(x):
            return None if x is None or not math.isfinite(x) else x
        return {"schema": SCHEMA, "emulations": list(self.emulations), "modules": list(self.modules),
                "reference_perplexity": f(self.reference_perplexity),
                "logits": [{"emulation": s.emulation, "kl": f(s.kl), "flips": s.flips, "rows": s.rows,
                            "perplexity": f(s.perplexity), "not_emulated": s.not_emulated} for s in self.logits],
                "layers": [{"emulation": e.emulation, "module": e.module, "rel_fro": f(e.rel_fro),
                            "snr_db": f(e.snr_db)} for e in self.layers]}

    def plot(self, path=None):
        """Each module's SNR per emulation (the modules in the order they ran), and the
        perplexity (or, without targets, the KL divergence) per emulation; saved to ``path``
        where one is given.  Returns the matplotlib figure."""
        import matplotlib
        if path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 4.5), gridspec_kw={"width_ratios": [3, 1]})
        snr = {(e.emulation, e.module): e.snr_db for e in self.layers}
        x = np.arange(len(self.modules))
        for em in self.emulations:
            y = [snr[(em, m)] for m in self.modules]
            ax.plot(x, [v if math.isfinite(v) else np.nan for v in y], marker=".", label=em)
        ax.set_xticks(x, [m or "(output)" for m in self.modules], rotation=90, fontsize=6)
        ax.set_ylabel("output SNR against the reference (dB)")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        if self.reference_perplexity is not None:
            values = [self.reference_perplexity, *(s.perplexity for s in self.logits)]
            bars = bx.bar(range(len(values)), values, color=["grey"] + [f"C{i}" for i in range(len(self.logits))])
            bx.set_ylabel("perplexity")
            bx.set_ylim(min(values) * 0.95, max(values) * 1.03)
        else:
            values = [s.kl for s in self.logits]
            bars = bx.bar(range(len(values)), values, color=[f"C{i}" for i in range(len(values))])
            bx.set_ylabel("KL divergence from the reference (nats)")
        bx.bar_label(bars, [f"{v:.4g}" for v in values], fontsize=6)
        names = (["reference"] if self.reference_perplexity is not None else []) + list(self.emulations)
        bx.set_xticks(range(len(names)), names, rotation=60, fontsize=7, ha="right")
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=120)
        return fig


def _num(v, spec=".4g") -> str:
    if v is None:
        return "-"
    return "inf" if v == math.inf else format(v, spec)


def _grid(head, rows) -> list:
    w = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def line(r):
        return "  ".join(f"{c:{n}s}" for c, n in zip(r, w)).rstrip()
    return [line(head), line(tuple("-" * n for n in w)), *map(line, rows)]


def _settings(emulations) -> dict:
    """label -> what :func:`emulate` takes, from a preset name, an Emulation, a sequence of them
    or a mapping label -> either (or a mapping of module-name patterns)."""
    from mmasim.torch.mode import label
    if isinstance(emulations, (str, Emulation)):
        emulations = [emulations]
    if isinstance(emulations, collections.abc.Mapping):
        out = dict(emulations)
    elif isinstance(emulations, collections.abc.Iterable):
        out = {}
        for e in emulations:
            if not isinstance(e, (str, Emulation)):
                raise EmulationError(f"evaluate: emulations are preset names or Emulations (or a mapping label -> "
                                     f"either), not {type(e).__name__}")
            out[e if isinstance(e, str) else label(e)] = e
    else:
        raise EmulationError(f"evaluate: emulations must be a preset name, an Emulation, a list of them or a "
                             f"mapping label -> either, not {type(emulations).__name__}")
    if not out:
        raise EmulationError("evaluate: no emulation given")
    return out


def _first_tensor(out):
    torch = torch_()
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (list, tuple)):
        for o in out:
            t = _first_tensor(o)
            if t is not None:
                return t
    return None


def _run(model, inputs, names, progress_bar, what):
    """The model's output and each module's outputs (float64 numpy, per call) in one forward."""
    torch = torch_()
    seen: dict = {}
    handles = []

    def keep(name):
        def hook(module, args, output):
            t = _first_tensor(output)
            if t is not None and t.is_floating_point():
                seen.setdefault(name, []).append(t.detach().to("cpu", torch.float64).numpy())
        return hook

    for module, name in names.items():
        handles.append(module.register_forward_hook(keep(name)))
    doing(progress_bar, what)
    try:
        with torch.no_grad():
            out = model(**inputs) if isinstance(inputs, dict) else model(*inputs)
    finally:
        for h in handles:
            h.remove()
    done(progress_bar)
    return _first_tensor(out), seen


def _error(ref: list, got: list):
    """(relative Frobenius error, SNR dB) of every call of a module together."""
    r = np.concatenate([x.ravel() for x in ref])
    g = np.concatenate([x.ravel() for x in got])
    noise = float(np.sum((g - r) ** 2))
    signal = float(np.sum(r ** 2))
    rel = math.sqrt(noise / signal) if signal else (0.0 if noise == 0 else math.nan)
    snr = math.inf if noise == 0 else (10 * math.log10(signal / noise) if signal else -math.inf)
    return rel, snr


def _perplexity(logits, targets) -> float:
    torch = torch_()
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(), targets.reshape(-1))
    return float(torch.exp(ce))


def evaluate(model, inputs, emulations, targets=None, *, on_unsupported="warn", progress=None) -> Evaluation:
    """Run ``model`` on ``inputs`` in torch's arithmetic and under each of ``emulations``; see
    the module for what is measured.

    ``inputs``: a tensor, a tuple of positional arguments or a dict of keyword arguments.
    ``emulations``: a preset name, an :class:`Emulation`, a list of them, or a mapping from a
    label to what :func:`emulate` takes (a preset name, an Emulation, a mapping of module-name
    patterns).  ``targets``: the class of each logits row (the logits' shape without its last
    dimension), for the perplexity.  ``on_unsupported``: as :func:`emulate` takes it.
    ``progress``: a bar over the runs (``None``: on a terminal only)."""
    torch = torch_()
    from mmasim.torch.mode import emulate
    if not isinstance(model, torch.nn.Module):
        raise EmulationError(f"evaluate needs a torch.nn.Module, not {type(model).__name__}")
    settings = _settings(emulations)
    inputs = inputs if isinstance(inputs, (tuple, dict)) else (inputs,)
    names = {m: n for n, m in model.named_modules()}
    b = bar(len(settings) + 1, "evaluate", " run", progress)
    try:
        ref_out, ref = _run(model, inputs, names, b, "reference")
        if ref_out is None or not ref_out.is_floating_point():
            raise EmulationError("evaluate: the model's output is no float tensor (the logits)")
        order = list(ref)          # the modules in the order they first returned: the model itself last
        ref_logits = ref_out.detach().double().cpu()
        ref_ppl = None if targets is None else _perplexity(ref_logits, targets)
        layers, logits, traces = [], [], {}
        for lab, setting in settings.items():
            with emulate(model, setting, on_unsupported=on_unsupported) as trace:
                out, got = _run(model, inputs, names, b, lab)
            traces[lab] = trace
            for n in order:
                layers.append(LayerError(lab, n, *_error(ref[n], got.get(n, ref[n]))))
            lg = out.detach().double().cpu()
            logp, logq = (torch.log_softmax(t.reshape(-1, t.shape[-1]), -1) for t in (ref_logits, lg))
            kl = float((logp.exp() * (logp - logq)).sum(-1).mean())
            top = (ref_logits.reshape(-1, lg.shape[-1]).argmax(-1) != lg.reshape(-1, lg.shape[-1]).argmax(-1))
            logits.append(LogitStats(lab, kl, int(top.sum()), int(top.numel()),
                                     None if targets is None else _perplexity(lg, targets), len(trace.not_emulated)))
    finally:
        if b is not None:
            b.close()
    return Evaluation(tuple(settings), tuple(order), tuple(layers), tuple(logits), ref_ppl, traces)
