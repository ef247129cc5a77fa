"""The IEEE chains' fast paths (``fma``, ``mul_add_chain``, ``ftz_mul_add``): the numba kernels'
decisions and the f32 FMA chain's product bound.
"""

from __future__ import annotations

from mmasim.backends.fastpaths.shared import Bound, Decision, builtin_decision

def _ieee_chain(plan, family, path):
    """The IEEE chain families: the built-in accumulator, unscaled, RNE into f32 or f64,
    one step over the whole K."""
    d = builtin_decision(plan, family, path, scaled=False, modes=("rne",))
    if d and plan.encoding.format not in ("f32", "f64"):
        return Decision(path, f"rounding into {plan.encoding.format} (f32 or f64 only)")
    if d and plan.step != plan.datapath.stored_k:
        return Decision(path, f"steps of {plan.step}, not one over K {plan.datapath.stored_k}")
    return d


def numba_fma(plan) -> Decision:
    """The numba FMA chain kernels: :func:`_ieee_chain`; into f32 with :func:`fma_product_bound`."""
    d = _ieee_chain(plan, "fma", "numba fma")
    if d and plan.encoding.format == "f32":
        bound = fma_product_bound(plan.a_format, plan.b_format)
        if not bound:
            return Decision(d.path, bound.why_not())
    return d


def numba_mul_add(plan) -> Decision:
    """The numba multiply-then-add kernels: :func:`_ieee_chain`."""
    return _ieee_chain(plan, "mul_add_chain", "numba mul_add")


def numba_ftz(plan) -> Decision:
    """The numba FTZ mul-add kernel: :func:`_ieee_chain` into f32, partial sums of 2 or 4
    products dividing K."""
    d = _ieee_chain(plan, "ftz_mul_add", "numba ftz_mul_add")
    P = plan.parameters.get("P")
    if d and (plan.encoding.format != "f32" or P not in (2, 4) or plan.datapath.stored_k % P):
        return Decision(d.path, f"into {plan.encoding.format} with P {P} (f32, P 2 or 4 dividing K)")
    return d


def fma_product_bound(a_format, b_format) -> Bound:
    """The f32 FMA chain kernel's products are exact in binary64, as the reference needs
    (it refuses otherwise): float significands of ``man_bits + 1`` bits each, a product of at
    most ``man_a + man_b + 2 <= 53`` bits."""
    bits = a_format.man_bits + b_format.man_bits + 2
    floats = not (a_format.integer or b_format.integer)
    return Bound("f32 fma product bound", floats and bits <= 53, dict(floats=floats, product_bits=bits, limit=53))
