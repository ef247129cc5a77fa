"""``mmasim.gemm``'s epilogue on operands on the CUDA device, without a GPU.

Under numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``, in a subprocess: tests/cuda_sim.py),
device operands (``__cuda_array_interface__`` only) of two datapaths, H100's e4m3 wgmma and an
f16 mma.sync, go through promotion and split-K combined (``promote_every`` one K tile,
``split_k=2``) and the epilogue, for every output format and every legal ``saturate``, with
and without ``alpha`` and ``beta * C``.  The accumulators are built to hold what the conversion
must get right: each row of A sums a few values (B's column ``j`` the same scale ``s_j`` in every
K row), so the accumulator is ``s_j`` times a chosen sum: RNE ties of each output format (to
even, up and down, among subnormals too), values past each format's largest (and the tie just
past it), subnormals, NaN and (f16 inputs) infinities; ``alpha = 2**111`` and ``2**-111`` carry
them past binary32's and bf16's range and into their subnormals; the source C holds NaN,
infinities, the largest value and subnormals of its format.

Expectation: the host composition's words (``backend="numpy"``, the reference: its epilogue is
checked against ml_dtypes and CUTLASS in tests/test_gemm_epilogue.py); and no device -> host copy
reads an operand's memory.  Bad options raise, on device operands, the error class the host
raises.
"""

from __future__ import annotations

import pytest

import cuda_sim

DATAPATHS = {
    "e4m3 wgmma": dict(arch="H100", instruction="wgmma.mma_async.m64n8k32.f32.e4m3.e4m3", M=64, k=32),
    "f16 mma": dict(arch="H100", instruction="mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", M=32, k=16),
}
SATURATE = {"f32": (None, True, False), "f16": (None, True, False), "bf16": (None, True, False),
            "e4m3": (None, True), "e5m2": (None, True, False)}
#: variant -> (alpha, with beta * C); "past binary32" / "binary32 subnormals" for f32 and bf16 only
VARIANTS = {"acc": (None, False), "alpha, beta*C": ("-1.5", True), "past binary32": ("2**111", False),
            "binary32 subnormals": ("2**-111", False)}


def _cases():
    for dp in DATAPATHS:
        for fmt, sats in SATURATE.items():
            for sat in sats:
                for variant in VARIANTS:
                    if variant in ("past binary32", "binary32 subnormals") and fmt not in ("f32", "bf16"):
                        continue
                    yield f"{dp}|{fmt}|{sat}|{variant}"


CASES = list(_cases())

_SCRIPT = """
    import ml_dtypes
    DATAPATHS, VARIANTS = json.loads(sys.argv[1])["datapaths"], json.loads(sys.argv[1])["variants"]
    inf, nan = float("inf"), float("nan")
    # the sums of A's rows (B's column j is s_j in every K row: the accumulator is s_j * sum)
    ROWS = [[1, 2**-4], [1, 3 * 2**-4],                 # e4m3 ties: down, up (to even)
            [1, 2**-3], [1, 3 * 2**-3],                 # e5m2 ties
            [1, 2**-8], [1, 3 * 2**-8],                 # bf16 ties
            [256, 2**-3], [256, 3 * 2**-3],             # f16 ties
            [3 * 2**-9], [2**-9], [5 * 2**-9, 2**-9],   # subnormals (with s = 2**-1: ties among them)
            [448, 16], [448, 32], [448, 448],           # past e4m3's largest (464: the tie just past it)
            [240], [256, -2**-4], [256, -2**-3],        # e5m2's tie past its largest (* 256); f16's; f16's largest
            [256, 224, 28, 3],                          # 511 = (2 - 2**-8) * 2**8: bf16's tie past its largest
            [nan], [inf], [-inf], [inf, -inf], [0], [-1.5, 2**-6]]
    S = [1, -1, 256, -2**-8, 2**-1, 2**4, -2**7, 2**-3]
    SOURCE = {"f32": [0x7F800000, 0xFF800000, 0x7FC00000, 0x7F7FFFFF, 0x00000001, 0x80000003, 0x3F800000],
              "f16": [0x7C00, 0xFC00, 0x7E00, 0x7BFF, 0x0001, 0x8003, 0x3C00],
              "bf16": [0x7F80, 0xFF80, 0x7FC0, 0x7F7F, 0x0001, 0x8003, 0x3F80],
              "e4m3": [0x7F, 0xFF, 0x7E, 0xFE, 0x01, 0x83, 0x38],
              "e5m2": [0x7C, 0xFC, 0x7E, 0x7B, 0x01, 0x83, 0x3C]}
    ELEM = {"e4m3 wgmma": (ml_dtypes.float8_e4m3fn, np.uint8), "f16 mma": (np.float16, np.uint16)}
    WORD = {"f32": np.uint32, "f16": np.uint16, "bf16": np.uint16, "e4m3": np.uint8, "e5m2": np.uint8}
    rng = np.random.default_rng(31)
    ops = {}
    for name, dp in DATAPATHS.items():
        M, k = dp["M"], dp["k"]
        K = 4 * k
        vals = np.zeros((M, K))
        for i in range(M):
            row = ROWS[i] if i < len(ROWS) else list(rng.integers(-8, 8, 3) * 2.0 ** -3)
            # a row's terms in K tiles 0 and 3, of different split-K slices and promotion chunks
            for t, v in enumerate(row):
                vals[i, (t % 2) * 3 * k + t // 2] = v
        et, wt = ELEM[name]
        A = np.asarray(vals, np.float32).astype(et).view(wt)
        B = np.asarray(np.broadcast_to(S, (K, 8)), np.float32).astype(et).view(wt).copy()
        ops[name] = (A, B)
    out = {}
    for case in json.loads(sys.argv[1])["cases"]:
        dpn, fmt, sat, variant = case.split("|")
        dp = DATAPATHS[dpn]
        A, B = ops[dpn]
        M, k = dp["M"], dp["k"]
        alpha, with_c = VARIANTS[variant]
        opts = dict(out_format=fmt, promote_every=k, split_k=2)
        if sat != "None":
            opts["saturate"] = sat == "True"
        if alpha is not None:
            opts["alpha"] = np.float32(eval(alpha))
        C = None
        if with_c:
            opts["beta"] = np.float32(0.5)
            C = rng.integers(0, 1 << (8 * np.dtype(WORD[fmt]).itemsize), (M, 8)).astype(WORD[fmt])
            C[:7, 0] = SOURCE[fmt]
            C[7:14, 3] = SOURCE[fmt]
        inst = dict(arch=dp["arch"], instruction=dp["instruction"])
        want = mmasim.gemm(A, B, C, backend="numpy", **inst, **opts)
        stubs = [Stub(x) for x in (A, B)] + ([] if C is None else [Stub(C)])
        del copies[:]
        dev = mmasim.gemm(stubs[0], stubs[1], None if C is None else stubs[2], backend="cuda", **inst, **opts)
        n_copied = copied([s.a for s in stubs])
        out[case] = {"want": want.tolist(), "device": dev.copy_to_host().tolist(), "device type": type(dev).__name__,
                     "operand copies": n_copied, "dtype": str(want.dtype)}
    print(json.dumps(out))
"""


@pytest.fixture(scope="module", name="simulated")
def _simulated():
    return cuda_sim.run(_SCRIPT, {"cases": CASES, "datapaths": DATAPATHS, "variants": VARIANTS})


@pytest.mark.parametrize("case", CASES)
def test_the_epilogue_of_device_operands_gives_the_host_words(simulated, case):
    """The device composition's D words (promotion, split-K and the epilogue on the device) are
    the host composition's, word for word."""
    rec = simulated[case]
    assert rec["device type"] == "FakeCUDAArray"
    assert rec["device"] == rec["want"]


@pytest.mark.parametrize("case", CASES)
def test_the_epilogue_never_copies_device_operands_to_the_host(simulated, case):
    assert simulated[case]["operand copies"] == 0


#: name -> (gemm options beside the f16 mma's A, B; "C": the C given, as words of a dtype or values)
BAD = {
    "out_format f64": dict(out_format="f64"),
    "e4m3 without saturation": dict(out_format="e4m3", saturate=False),
    "saturate not a bool": dict(out_format="f16", saturate="yes"),
    "alpha NaN": dict(alpha="nan"),
    "alpha not binary32": dict(alpha="0.1"),
    "beta without C": dict(beta="1"),
    "C without beta": dict(alpha="2", C="uint32"),
    "C word past its container": dict(out_format="f16", beta="1", C="int16 negative"),
    "C values": dict(out_format="f16", beta="1", C="float32"),
    "C of another shape": dict(out_format="f16", beta="1", C="uint16 short"),
    "k_order reverse": dict(alpha="2", k_order="reverse"),
    "words not a bool": dict(out_format="f16", words="yes"),
    "split_k not dividing K": dict(out_format="f16", split_k=3),
    "promote_every not a multiple of k": dict(out_format="bf16", promote_every=8),
    "integer D": dict(alpha="2", instruction="mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"),
}

_BAD_SCRIPT = """
    rng = np.random.default_rng(5)
    out = {}
    for name, opts in json.loads(sys.argv[1]).items():
        opts = dict(opts)
        inst = dict(arch="H100", instruction=opts.pop("instruction",
                                                      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"))
        dt = np.uint8 if "s8" in inst["instruction"] else np.uint16
        A = rng.integers(0, 0x3C00, (16, 32)).astype(dt)
        B = rng.integers(0, 0x3C00, (32, 8)).astype(dt)
        c = opts.pop("C", None)
        C = None if c is None else {"uint32": np.zeros((16, 8), np.uint32),
                                    "int16 negative": np.full((16, 8), -1, np.int16),
                                    "float32": np.ones((16, 8), np.float32),
                                    "uint16 short": np.zeros((8, 8), np.uint16)}[c]
        for key in ("alpha", "beta"):
            if key in opts:
                opts[key] = np.float64(float(opts[key])) if opts[key] == "0.1" else np.float32(float(opts[key]))
        got = {}
        for where, (a, b, cc) in (("host", (A, B, C)), ("device", tuple(None if x is None else Stub(x)
                                                                         for x in (A, B, C)))):
            try:
                mmasim.gemm(a, b, cc, backend="numpy" if where == "host" else "cuda", **inst, **opts)
                got[where] = None
            except mmasim.MMAError as e:
                got[where] = type(e).__name__
        out[name] = got
    # words=False: D's values; f16 on the device a float16 view of its words, bf16 has no numba dtype
    A = rng.integers(0, 0x3C00, (16, 32)).astype(np.uint16)
    B = rng.integers(0, 0x3C00, (32, 8)).astype(np.uint16)
    inst = dict(arch="H100", instruction="mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    for fmt in ("f32", "f16"):
        want = mmasim.gemm(A, B, backend="numpy", out_format=fmt, words=False, **inst)
        stubs = [Stub(A), Stub(B)]
        del copies[:]
        dev = mmasim.gemm(*stubs, backend="cuda", out_format=fmt, words=False, **inst)
        host = dev.copy_to_host()
        out["values " + fmt] = {"dtypes": [str(want.dtype), str(host.dtype)], "copies": copied([s.a for s in stubs]),
                                "same": host.tobytes() == want.tobytes()}
    try:
        mmasim.gemm(Stub(A), Stub(B), backend="cuda", out_format="bf16", words=False, **inst)
        out["values bf16"] = None
    except mmasim.MMAError as e:
        out["values bf16"] = [type(e).__name__, str(e)]
    q = mmasim.quantize(np.ones((16, 32), np.float32), "nvfp4")
    try:
        mmasim.gemm(q, Stub(B), backend="cuda", out_format="f16", **inst)
        out["quantized"] = None
    except mmasim.MMAError as e:
        out["quantized"] = [type(e).__name__, str(e)]
    print(json.dumps(out))
"""


@pytest.fixture(scope="module", name="refused")
def _refused():
    return cuda_sim.run(_BAD_SCRIPT, BAD)


@pytest.mark.parametrize("case", list(BAD))
def test_bad_epilogue_options_on_device_operands_raise_the_hosts_error(refused, case):
    got = refused[case]
    assert got["host"] is not None
    assert got["device"] == got["host"]


@pytest.mark.parametrize("fmt", ["f32", "f16"])
def test_words_false_gives_the_values_on_the_device(refused, fmt):
    rec = refused["values " + fmt]
    assert rec["dtypes"] == [{"f32": "float32", "f16": "float16"}[fmt]] * 2
    assert rec["same"]
    assert rec["copies"] == 0


def test_words_false_with_a_format_numba_has_no_dtype_of_is_refused(refused):
    name, message = refused["values bf16"]
    assert name == "GemmOptionError"
    assert "bf16" in message and "words=None or True" in message


#: hand-worked words of the f16 mma's cases: case -> [(row, column, D word)] (rows: the script's
#: ROWS, columns: its S = [1, -1, 256, -2**-8, 2**-1, 2**4, -2**7, 2**-3])
HAND_WORKED = {
    "f16 mma|f16|None|acc": [(6, 0, 0x5C00),        # 256 + 2**-3: a tie, to even 256
                             (7, 0, 0x5C02),        # 256 + 3 * 2**-3: a tie, to even 256.5
                             (15, 2, 0x7C00),       # 65520, the tie past f16's largest: inf
                             (15, 6, 0xF800),       # -32760: a tie, to even -32768
                             (18, 0, 0x7E00),       # NaN: the quiet NaN
                             (19, 1, 0xFC00)],      # -inf
    "f16 mma|f16|True|acc": [(15, 2, 0x7BFF), (19, 1, 0xFBFF), (18, 0, 0x7E00)],
    "f16 mma|e4m3|None|acc": [(0, 0, 0x38),         # 1 + 2**-4: a tie, to even 1
                              (1, 0, 0x3A),         # 1 + 3 * 2**-4: a tie, to even 1.25
                              (8, 4, 0x02),         # 1.5 * 2**-9, a tie among subnormals: 2**-8
                              (10, 4, 0x03),        # 3 * 2**-9
                              (11, 0, 0x7E),        # 464: satfinite 448
                              (18, 0, 0x7F), (19, 0, 0x7E), (19, 1, 0xFE)],
    "f16 mma|bf16|False|past binary32": [(17, 2, 0x7F80),   # (2 - 2**-8) * 2**127: the tie past bf16's largest
                                         (17, 0, 0x7B80)],  # (2 - 2**-8) * 2**119: a tie, to even 2**120
    "f16 mma|bf16|True|past binary32": [(17, 2, 0x7F7F)],
    "f16 mma|f32|None|past binary32": [(13, 2, 0x7F800000)],   # 1.75 * 2**128: inf in binary32
}


@pytest.mark.parametrize("case", list(HAND_WORKED))
def test_the_device_epilogue_gives_hand_worked_words(simulated, case):
    """The accumulators the script builds reach the conversion's ties, overflows, subnormals and
    specials: their device words, worked by hand."""
    got = simulated[case]["device"]
    assert [(r, c, got[r][c]) for r, c, _ in HAND_WORKED[case]] == HAND_WORKED[case]


def test_a_quantized_tensor_beside_device_operands_is_refused_not_copied(refused):
    """A quantized tensor is a host object: beside device operands it is refused with what to pass."""
    name, message = refused["quantized"]
    assert name == "DtypeError"
    assert "quantized tensor" in message and "on the device" in message
