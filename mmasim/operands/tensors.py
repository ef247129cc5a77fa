"""torch tensors in and out (the ``[torch]`` extra), and numpy masked arrays refused.

Owns the reading of a tensor as the numpy array of the same meaning (:func:`to_numpy`: integer
tensors are words, float tensors values, the ``bfloat16`` / ``float8_*`` / ``float4_e2m1fn_x2``
tensors read bit for bit into their ``ml_dtypes`` type) and of a result back into a tensor on
the first tensor operand's device (:func:`from_numpy`); :func:`accepts_tensors` wraps an API
function in both.  Never imports torch: :func:`is_tensor` looks in ``sys.modules``, so mmasim
runs without it.  Refuses masked arrays (:func:`refuse_masked`) and a tensor with no numpy
counterpart (:class:`~mmasim.DtypeError`).  The rule for users: docs/user-guide.md, "Typed arrays".
"""

from __future__ import annotations

import functools
import inspect
import sys

import numpy as np

from mmasim.errors import DtypeError, OperandError

#: torch dtype name -> (same-size integer dtype name for a bit view, ml_dtypes type name)
_BITWISE = {
    "bfloat16": ("int16", "bfloat16"),
    "float8_e4m3fn": ("uint8", "float8_e4m3fn"),
    "float8_e5m2": ("uint8", "float8_e5m2"),
    "float8_e4m3fnuz": ("uint8", "float8_e4m3fnuz"),
    "float8_e5m2fnuz": ("uint8", "float8_e5m2fnuz"),
    "float8_e8m0fnu": ("uint8", "float8_e8m0fnu"),
}
_NUMPY_SIGNED = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}
_NUMPY_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _torch():
    return sys.modules.get("torch")


def is_tensor(x) -> bool:
    """Whether ``x`` is a torch tensor (without importing torch)."""
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def dtype_name(t) -> str:
    """``"float16"`` for ``torch.float16`` and so on."""
    return str(t.dtype).rpartition(".")[2]


def _ml_dtypes(name: str, what: str):
    try:
        import ml_dtypes
    except ImportError:
        raise DtypeError(f"operand {what}: a torch {name} tensor needs ml_dtypes to be read exactly "
                         "(pip install ml_dtypes, or the [torch] extra)") from None
    return np.dtype(getattr(ml_dtypes, name))


def _on_host(t, what: str):
    """``t`` detached, on the host, with its conjugate / negative bits resolved; a tensor
    that holds no plain array of elements (meta, sparse, nested, quantized) is refused."""
    torch = _torch()
    if t.is_meta:
        raise OperandError(f"operand {what}: a meta tensor has a shape and a dtype but no elements; "
                           "pass a tensor that holds its values (on the CPU or a GPU)")
    if t.layout != torch.strided:
        raise OperandError(f"operand {what}: a {str(t.layout).rpartition('.')[2]} tensor is not a plain array of "
                           "its elements; pass t.to_dense()")
    if getattr(t, "is_nested", False):
        raise OperandError(f"operand {what}: a nested tensor has no single shape; pass one tensor per shape")
    if t.is_quantized:
        raise DtypeError(f"operand {what}: a quantized {dtype_name(t)} tensor holds codes of a scale and zero "
                         "point, not the operand's words or values; pass t.dequantize() or t.int_repr()")
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    return t.resolve_conj().resolve_neg()


def host_bits(t, what: str = "operand"):
    """The bytes of tensor ``t`` as an unsigned numpy array of its element size (a copy
    on the host; a CUDA tensor is copied)."""
    torch = _torch()
    t = _on_host(t, what).contiguous()
    size = t.element_size()
    signed = getattr(torch, str(_NUMPY_SIGNED[size].__name__))
    return t.view(signed).numpy().view(_NUMPY_UNSIGNED[size])


def to_numpy(t, what: str = "operand"):
    """The numpy array a torch tensor stands for (words stay words, values stay values).

    Integer tensors (``uint8/16/32/64``, ``int8/16/32/64``) are container words, as numpy
    integer arrays are; ``float16/32/64`` tensors are values; ``bfloat16``, ``float8_e4m3fn``,
    ``float8_e5m2``, ``float8_e4m3fnuz``, ``float8_e5m2fnuz`` and ``float8_e8m0fnu`` tensors are
    values too, read bit for bit into the ``ml_dtypes`` type of the same name (torch has no numpy
    conversion for them); ``float4_e2m1fn_x2`` holds two e2m1 values per byte, element ``2i`` in
    the low nibble (torch's own packing), and becomes an ``ml_dtypes.float4_e2m1fn`` array whose
    last axis is twice as long.  CUDA (and other device) tensors are copied to the host first."""
    name = dtype_name(t)
    if name in _BITWISE:
        return host_bits(t, what).view(_ml_dtypes(_BITWISE[name][1], what))
    if name == "float4_e2m1fn_x2":
        packed = host_bits(t, what)
        codes = np.stack([packed & 0xF, packed >> 4], axis=-1).reshape(*packed.shape[:-1], -1)
        return codes.view(_ml_dtypes("float4_e2m1fn", what))
    t = _on_host(t, what)
    try:
        return t.numpy()
    except (TypeError, RuntimeError) as exc:
        raise DtypeError(f"operand {what}: a torch {name} tensor cannot carry an operand ({exc})") from None


def from_numpy(arr, device=None):
    """A torch tensor holding numpy array ``arr`` (words or values), on ``device``: D words as
    ``uint16`` / ``uint32`` / ``uint64`` tensors, values as the torch dtype of their numpy or
    ``ml_dtypes`` type."""
    torch = _torch()
    arr = np.asarray(arr)
    if not arr.flags.c_contiguous:
        arr = arr.copy()            # (np.ascontiguousarray would make a 0-d result 1-d)
    dt = arr.dtype
    torch_name = next((k for k, v in _BITWISE.items() if v[1] == dt.name), None)
    if dt.kind in "iuf" and dt.itemsize <= 8:
        out = torch.from_numpy(arr)
    elif torch_name is not None and dt.type.__module__.startswith("ml_dtypes"):
        out = torch.from_numpy(arr.view(_NUMPY_SIGNED[dt.itemsize])).view(getattr(torch, torch_name))
    else:
        raise DtypeError(f"a result of numpy dtype {dt} has no torch dtype")
    return out if device is None or str(device) == "cpu" else out.to(device)


def refuse_masked(x, what: str = "operand") -> None:
    """A numpy masked array is a :class:`~mmasim.DtypeError`: a masked element has no word, and
    computing with the data under the mask would ignore it."""
    if isinstance(x, np.ma.MaskedArray):
        raise DtypeError(f"operand {what}: a numpy masked array cannot carry an operand (a masked element has no "
                         "word); pass x.filled(value) or the plain array np.asarray(x)")


def plain_array(x, what: str = "operand") -> np.ndarray:
    """``np.asarray(x)`` for an array that comes in, a masked array refused (:func:`refuse_masked`)."""
    refuse_masked(x, what)
    return np.asarray(x)


def _first_tensor(args, kwargs):
    for x in (*args, *kwargs.values()):
        if is_tensor(x):
            return x
    return None


def accepts_tensors(fn):
    """Decorate an API function (or method) so that its numpy masked arrays are refused
    (:func:`refuse_masked`) and its torch tensor arguments are read
    as numpy arrays (:func:`to_numpy`) and, when any was given, a numpy result comes back
    as a tensor on the first tensor's device.  Without torch imported it costs one
    dictionary look-up."""

    names = list(inspect.signature(fn).parameters)     # operands named as the caller named them

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        for i, x in enumerate(args):
            refuse_masked(x, fn.__code__.co_varnames[i] if i < fn.__code__.co_argcount else "operand")
        for k, x in kwargs.items():
            refuse_masked(x, k)
        if "torch" not in sys.modules:
            return fn(*args, **kwargs)
        first = _first_tensor(args, kwargs)
        if first is None:
            return fn(*args, **kwargs)
        args = tuple(to_numpy(x, names[i] if i < len(names) else "operand") if is_tensor(x) else x
                     for i, x in enumerate(args))
        kwargs = {k: to_numpy(x, k) if is_tensor(x) else x for k, x in kwargs.items()}
        out = fn(*args, **kwargs)
        return from_numpy(out, first.device) if isinstance(out, np.ndarray) else out

    return wrapper
