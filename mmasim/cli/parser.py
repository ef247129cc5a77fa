"""The ``mmasim`` command's parser: every subcommand, its arguments and help, and the handler
(:mod:`mmasim.cli.commands`) it calls.
"""

from __future__ import annotations

import argparse

from mmasim.cli import commands as c
from mmasim.cli.arguments import ARCH_HELP, Parser, count_arg, path_arg, plot_path_arg, version


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="mmasim", description="Bit-exact GPU matrix-multiply-accumulate simulator",
                epilog="Exit status: 0 success, 1 failure, 2 usage error.")
    p.add_argument("--version", action="version", version=f"mmasim {version()}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)

    def add_json(s):
        s.add_argument("--json", action="store_true", help="one JSON document on stdout (docs/user-guide.md)")

    s = sub.add_parser("list", help="architectures, or the instructions of one")
    s.add_argument("arch", nargs="?", help=ARCH_HELP + "; without it, every architecture")
    add_json(s)
    s.set_defaults(func=c.cmd_list)

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
        s.add_argument("arch", help=ARCH_HELP)
        s.add_argument("instruction", help="an instruction string, as mmasim list ARCH prints it or shorter "
                                           "(docs/user-guide.md)")
        add_qualifiers(s)
        add_json(s)

    s = sub.add_parser("explain", help="composition, parameters and validation status of a datapath")
    add_instruction(s)
    s.set_defaults(func=c.cmd_explain)

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
    s.set_defaults(func=c.cmd_run)

    s = sub.add_parser(
        "validate",
        help="run vector files (default: every bundled one) and compare every word",
        description="Run frozen vector files through the simulator. Exit status 0 when every word matches, "
                    "1 on any mismatch, unreadable/unresolvable file, or when no vectors are found.",
    )
    s.add_argument("paths", nargs="*", metavar="PATH", help="vector files or directories (default: the bundled vectors/)")
    add_json(s)
    s.add_argument("--show", type=count_arg(0, "--show"), default=3, metavar="N",
                   help="mismatching cases shown per file (default 3)")
    s.add_argument("--failures-only", action="store_true", help="list only files with mismatches or errors")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    s.add_argument("--backend", default=None, metavar="NAME",
                   help="the backend that computes the words: auto or a registered one (numpy, numba, cuda, ...; "
                        "default: MMASIM_BACKEND, else auto)")
    s.set_defaults(func=c.cmd_validate)

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
    s.add_argument("--cases", type=count_arg(1, "--cases"), default=4096,
                   help="number of generated cases, at least 1 (default 4096)")
    s.add_argument("--seed", type=count_arg(0, "--seed"), default=0, help="random seed, a non-negative integer (default 0)")
    s.add_argument("--plot", metavar="FILE.png", type=plot_path_arg,
                   help="bar charts of how far the results are apart and how far each is from the exact result, "
                        "in ULPs (needs matplotlib: the [plot] extra); the type comes from the extension "
                        "(.png, .pdf, .svg, ...)")
    add_qualifiers(s)
    add_json(s)
    s.set_defaults(func=c.cmd_compare)

    from mmasim.accuracy import cli as accuracy_cli

    s = accuracy_cli.add_parser(sub, add_qualifiers, add_json, plot_path_arg, count_arg)
    s.set_defaults(func=c.cmd_accuracy)

    s = sub.add_parser(
        "layout", help="which lane and register hold each element of an operand (text table or picture)",
        description="The fragment map of an operand as the ISA figures draw it: the matrix, each cell naming "
                    "the lane (thread) and element that hold it (T<lane>:<i>; TMEM: L<lane>:c<column>).")
    add_instruction(s)
    s.add_argument("--operand", choices=("a", "b", "c", "d", "scale_a", "scale_b", "sparse_metadata"), default="a",
                   help="the operand (default a; scale_a / scale_b of block-scaled mma.sync, sparse_metadata "
                        "of mma.sp, whose A is the compressed A)")
    s.add_argument("--byte-id", type=count_arg(0, "--byte-id"), default=0,
                   help="byte-id selector of scale_a / scale_b (default 0)")
    s.add_argument("--thread-id", type=count_arg(0, "--thread-id"), default=0,
                   help="thread-id selector of scale_a / scale_b (default 0)")
    s.add_argument("--selector", type=count_arg(0, "--selector"), default=0,
                   help="sparsity selector of sparse_metadata (default 0)")
    s.add_argument("--lane-alignment", type=count_arg(0, "--lane-alignment"), default=0,
                   help="TMEM lane alignment (0 or 16) of the half-data-path tcgen05 layouts C and F (default 0)")
    s.add_argument("--alayout", choices=("row", "col"),
                   help="A's .row/.col (mma.sync m8n8k4 .f16; default: the instruction's, else row)")
    s.add_argument("--blayout", choices=("row", "col"),
                   help="B's .row/.col (mma.sync m8n8k4 .f16; default: the instruction's, else col)")
    s.add_argument("--out", metavar="FIG.png", type=plot_path_arg,
                   help="draw the map into an image (needs matplotlib); the type comes from the extension")
    s.set_defaults(func=c.cmd_layout)

    s = sub.add_parser(
        "characterize", help="infer a datapath's window parameters from probe ladders (docs/characterize.md)",
        description="Run the fixed probe ladders of docs/characterize.md through the simulator (or read a "
                    "device's words from a vector file written by mmasim harness run --probes) and infer the "
                    "window parameters from the D words alone: a proposed [[datapath]] entry, with the probes "
                    "that decided each parameter. Exit status 0 when the proposal reproduces every probe word, "
                    "1 otherwise.")
    add_instruction(s)
    s.add_argument("--from-vectors", metavar="FILE", type=path_arg("file"),
                   help="an mmasim-vectors file holding the probe cases and the device's D words "
                        "(mmasim harness run --probes)")
    s.set_defaults(func=c.cmd_characterize)
    s = sub.add_parser("harness", help="generate, build and run hardware harness kernels (docs/harness.md)",
                       description="CUDA sources that run one instruction on a GPU, and a runner that writes "
                                   "the measured words as vector files for mmasim validate (docs/harness.md).")
    hsub = s.add_subparsers(dest="harness_command", required=True, parser_class=Parser)
    h = hsub.add_parser("generate", help="one self-contained source per instruction, its spec and build.sh")
    h.add_argument("arch", help=ARCH_HELP)
    h.add_argument("instructions", nargs="*", metavar="INSTRUCTION",
                   help="instructions (default: every instruction of the architecture)")
    h.add_argument("--out", required=True, type=path_arg("folder"), help="output folder")
    add_json(h)
    h.set_defaults(func=c.cmd_harness_generate)
    h = hsub.add_parser("run", help="build with nvcc (hipcc for AMD), run on the GPU, write one vector file per instruction")
    h.add_argument("arch", help=ARCH_HELP)
    h.add_argument("instructions", nargs="*", metavar="INSTRUCTION",
                   help="instructions (default: every instruction of the architecture)")
    h.add_argument("--out", required=True, type=path_arg("folder"), help="output folder for the vector files")
    h.add_argument("--cases", type=count_arg(1, "--cases"), default=100,
                   help="random tiles (instruction executions) per instruction, each M x N dot-product cases "
                        "(default 100)")
    h.add_argument("--probes", action="store_true", help="also run the probe ladders (docs/characterize.md)")
    h.add_argument("--seed", type=count_arg(0, "--seed"), default=0, help="random seed (default 0)")
    h.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    add_json(h)
    h.set_defaults(func=c.cmd_harness_run)

    s = sub.add_parser(
        "warmup", help="compile every kernel of the compiled (numba) backend into its cache, once per machine",
        description="Compile (or load from the kernel cache) every kernel signature the registered datapaths use, "
                    "so that later processes load them instead of compiling. The cache folder is $MMASIM_CACHE_DIR, "
                    "else the user cache folder (docs/performance.md).")
    s.add_argument("archs", nargs="*", metavar="ARCH", help="only the kernels of these architectures (default: all)")
    s.add_argument("--jobs", type=count_arg(1, "--jobs"), default=None,
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
    s.set_defaults(func=c.cmd_warmup)

    s = sub.add_parser("plugins", help="every plugin with its status (exit 1 when one failed to load)")
    add_json(s)
    s.set_defaults(func=c.cmd_plugins)

    from mmasim.torch import cli as torch_cli      # mmasim presets: the table imports no torch

    torch_cli.add_parser(sub, add_json)
    return p
