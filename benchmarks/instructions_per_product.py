#!/usr/bin/env python3
"""Instructions per product of ``Model.dot`` (one thread), counted by valgrind.

Run it twice under callgrind, once without the measured call and once with it; the inputs
are generated identically in both runs, so the difference of the two totals is the call's:

    valgrind --tool=callgrind --callgrind-out-file=cg0.out \\
        python benchmarks/instructions_per_product.py Ampere m16n8k16.f32.f16.f16.f32 0
    valgrind --tool=callgrind --callgrind-out-file=cg1.out \\
        python benchmarks/instructions_per_product.py Ampere m16n8k16.f32.f16.f16.f32 100000
    grep totals: cg0.out cg1.out     # (total1 - total0) / (100000 * K)

Counts, not seconds: repeatable whatever else the machine runs (docs/performance.md).
"""
import sys

import numpy as np

import mmasim
from mmasim.operands import wordgen

ROWS = 100_000

arch, ins, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
m = mmasim.MMA(arch, ins)
rng = np.random.default_rng(1)


def w(fmt, shape):
    x = wordgen.words(fmt, shape, rng, wordgen.WordKind.NEAR_ONE, padding=False)
    b = fmt.container_bits
    return x.astype(np.uint8 if b <= 8 else np.uint16 if b <= 16 else np.uint32)


a, b, c = w(m.a_format, (ROWS, m.k)), w(m.b_format, (ROWS, m.k)), w(m.c_format, (ROWS,))
s = {}
if m.datapath.scale:
    s = dict(scale_a=w(m.scale_format, (ROWS, m.datapath.blocks)), scale_b=w(m.scale_format, (ROWS, m.datapath.blocks)))
m.dot(a[:64], b[:64], c[:64], threads=1, **{k: v[:64] for k, v in s.items()})   # compile / load the cache
if n:
    m.dot(a[:n], b[:n], c[:n], threads=1, **{k: v[:n] for k, v in s.items()})
