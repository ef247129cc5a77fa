"""The data protocol between a generated harness kernel and the host side.

A generated kernel knows nothing of matrices: it loads 32-bit words into registers (or copies
them into shared memory), executes the one instruction, and stores the result registers. The
host side (Python) places the operands with the layouts of :mod:`mmasim.placement` before the
run and reads the result back after it.  Owns what both sides must agree on: one
:class:`KernelSpec` (the kernel's signature and its blocks) with a :class:`Buffer` per operand
(how its words are indexed), written beside each generated source as ``<name>.json``; and
the text that may reach a source (:func:`source_text`, else :class:`~mmasim.errors.HarnessError`).
"""
from __future__ import annotations

import json

import attrs

from mmasim.operands.display import safe
from mmasim.errors import HarnessError

SPACES = ("registers", "smem")


def source_text(text, what: str) -> str:
    """``text`` as it may reach a generated source or script: printable ASCII on one line,
    without the ``"`` and ``\\`` that end or escape a C string; anything else is a
    :class:`~mmasim.errors.HarnessError` naming the characters (the harness never writes them)."""
    if not isinstance(text, str):
        raise HarnessError(f"{what} must be a string, not {type(text).__name__}")
    bad = sorted({ch for ch in text if not " " <= ch <= "~" or ch in '"\\'})
    if bad:
        raise HarnessError(f"{what} '{safe(text)}' holds {', '.join(map(ascii, bad))}: a text that reaches a "
                           "generated source or script is printable ASCII on one line, without \" or \\")
    return text


@attrs.frozen
class Buffer:
    """One operand's words as the kernel reads (or writes) them.

    A ``registers`` buffer holds ``cases * threads * words`` words: thread ``t`` of case ``k``
    reads words ``[(k * threads + t) * words, ... + words)`` into its registers, in register
    order (PTX's ``{%r0, %r1, ...}`` operand order, the order :meth:`mmasim.Model.fragments`
    returns).  A ``smem`` buffer holds ``cases * words`` words: the kernel copies a case's words
    to shared memory at an address aligned to ``align`` bytes, and builds the matrix descriptor
    as ``descriptor`` with the start-address field filled in (``descriptor`` is encoded with
    start address 0).  Where the kernel's ``cluster`` > 1, "case" reads "block" throughout."""

    operand: str                      # "a", "b", "c", "d", "scale_a", "scale_b", "sparse_metadata"
    space: str                        # one of SPACES
    words: int                        # 32-bit words per thread ("registers") or per case ("smem")
    descriptor: int | None = None     # smem only: 64-bit descriptor word with start address 0
    align: int = 16                   # smem only: byte alignment of the copy
    layout: str = ""                  # the placement used (a layout name, for people and the host)

    def __attrs_post_init__(self):
        if self.space not in SPACES:
            raise ValueError(f"buffer space {self.space!r} is not one of {SPACES}")


@attrs.frozen
class KernelSpec:
    """One generated kernel: what it runs and the buffers it reads and writes.

    The kernel signature is fixed for every target::

        extern "C" __global__ void NAME(const uint32_t* const* in, uint32_t* out)

    ``in[i]`` is the buffer of ``inputs[i]`` and ``out`` the buffer of ``output``.  One thread
    block runs one case: ``blockIdx.x`` is the case index.  Where ``cluster`` > 1
    (``tcgen05.mma.cta_group::2``: a pair of CTAs), a case is run by ``cluster`` consecutive
    blocks (one thread-block cluster, ``__cluster_dims__`` in the kernel): block ``b = case *
    cluster + rank``, every buffer is indexed by ``b`` where it says case, and the host launches
    ``cases * cluster`` blocks."""

    arch: str                         # mmasim architecture name
    instruction: str                  # the canonical instruction (Model.instruction)
    qualifiers: dict                  # keyword qualifiers passed to mmasim.MMA, if any
    target: str                       # "sm_90a", "gfx942", ...
    threads: int                      # threads per block: 32, 128 (warpgroup / TMEM), 64 (wavefront)
    name: str                         # the kernel's C identifier, unique within an architecture
    assembly: str                     # the instruction exactly as the assembler sees it
    inputs: tuple                     # Buffer, in the order of the kernel's ``in`` array
    output: Buffer                    # D
    device: str                       # the device code: the kernel (and only device helpers)
    options: dict = attrs.field(factory=dict)   # choices made for this kernel (N, layouts, ...)
    cluster: int = 1                  # thread blocks per case (a cluster of this size: tcgen05 cta_group::2)

    def __attrs_post_init__(self):
        # every text of a spec reaches the generated source, its comments or build.sh
        for field in ("arch", "instruction", "target", "name", "assembly"):
            source_text(getattr(self, field), f"kernel spec {field}")
        for key, value in dict(self.qualifiers).items():
            source_text(str(key), "kernel spec qualifier")
            source_text(str(value), f"kernel spec qualifier {key}")

    def to_json(self) -> str:
        return json.dumps(attrs.asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "KernelSpec":
        raw = json.loads(text)
        raw["inputs"] = tuple(Buffer(**b) for b in raw["inputs"])
        raw["output"] = Buffer(**raw["output"])
        return cls(**raw)


def compile_target(model, vendor: str) -> str:
    """The target ``model``'s kernels are compiled for: its family's rule over the architecture's
    names (``Family.compile_target``); :class:`~mmasim.errors.UnsupportedDatapath` where there is none."""
    from mmasim import aliases
    from mmasim.errors import UnsupportedDatapath
    target = model.family.compile_target(aliases(model.arch))
    if target is None:
        raise UnsupportedDatapath(f"{model.arch}: no {vendor} target known to the harness")
    return target


def layout_name(model, operand: str) -> str:
    """The name of ``operand``'s register layout (:meth:`mmasim.Model.layout`) that a
    :class:`Buffer` records, or ``""`` where mmasim has none registered."""
    from mmasim.errors import MMAError
    try:
        return model.layout(operand).name
    except MMAError:
        return ""
