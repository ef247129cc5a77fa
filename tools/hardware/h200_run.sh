#!/usr/bin/env bash
# Measure every Hopper instruction on a lent H200 in one run of at most --budget seconds (default
# 450), offline, and pack the words into the output folder (docs/harness.md, "Running on a lent H200").
#
#   tools/hardware/h200_run.sh --out "$OUT" [--commit SHA]          # on the H200, from the repository root
#   tools/hardware/h200_run.sh --simulate --out DIR [--instructions I ...] [--jobs N]   # rehearsal, no GPU
#
# Steps: install (pip --target, else the source tree on PYTHONPATH), the GPU (nvidia-smi), nvcc,
# `mmasim harness generate Hopper`, then tools/hardware/h200_run.py measure (build every kernel on
# every core, run every instruction with --probes) and pack (OUT/h200-hopper-vectors.partNN.tar.xz,
# OUT/h200_summary.json; the log is OUT/h200_run.log).  --simulate: a stand-in program replaces each
# device binary (the simulator writes the words it would have written).  Other options go to
# h200_run.py (--instructions, --min-cases, --tile-cap, --seed, --jobs, --build-limit, --no-build,
# --no-validate).  --install auto|pip|pythonpath|none (default auto: pip, else pythonpath).
# Exit status: 0 packed (the summary says what ran), 2 refused (no GPU without --simulate, not
# compute capability 9.0, no output folder, a bad option), 1 a step failed.
set -uo pipefail

START=$(date +%s)
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SIMULATE=0
OUT_DIR=${OUT:-}
WORK=""
INSTALL=auto
BUDGET=450
COMMIT=${MMASIM_COMMIT:-}
PASS=()

usage() { sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
refuse() { echo "h200_run.sh: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
    case "$1" in
        --simulate) SIMULATE=1 ;;
        --out) [ $# -ge 2 ] || refuse "--out needs a folder"; OUT_DIR=$2; shift ;;
        --work) [ $# -ge 2 ] || refuse "--work needs a folder"; WORK=$2; shift ;;
        --install) [ $# -ge 2 ] || refuse "--install needs auto, pip, pythonpath or none"; INSTALL=$2; shift ;;
        --budget) [ $# -ge 2 ] || refuse "--budget needs seconds"; BUDGET=$2; shift ;;
        --commit) [ $# -ge 2 ] || refuse "--commit needs a value"; COMMIT=$2; shift ;;
        -h|--help) usage; exit 0 ;;
        *) PASS+=("$1") ;;
    esac
    shift
done
case "$INSTALL" in auto|pip|pythonpath|none) ;; *) refuse "--install must be auto, pip, pythonpath or none, not '$INSTALL'" ;; esac
case "$BUDGET" in ''|*[!0-9]*) refuse "--budget must be a whole number of seconds, not '$BUDGET'" ;; esac
[ -n "$OUT_DIR" ] || refuse "no output folder: pass --out DIR (or set OUT)"
if [ "$SIMULATE" = 0 ]; then
    command -v nvidia-smi >/dev/null 2>&1 \
        || refuse "no nvidia-smi: this script measures an NVIDIA H200 and there is no NVIDIA driver here; rehearse it without a GPU with --simulate"
    CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' ')
    [ -n "$CC" ] || refuse "nvidia-smi finds no GPU: $(nvidia-smi -L 2>&1 | head -n 1)"
    [ "$CC" = "9.0" ] || refuse "the GPU has compute capability $CC; the Hopper kernels (sm_90a) need 9.0 (an H100 or H200)"
fi
mkdir -p "$OUT_DIR" || refuse "cannot create the output folder $OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/h200-work.XXXXXX")}
mkdir -p "$WORK" && WORK=$(cd "$WORK" && pwd)
DEADLINE=$((START + BUDGET))
LOG="$OUT_DIR/h200_run.log"
TIMINGS=()

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
step() { STEP=$1; STEP_T0=$(now_ms); echo "== $(date -u +%H:%M:%S) $1 (t+$(( $(date +%s) - START )) s)"; }
step_done() { local ms=$(( $(now_ms) - STEP_T0 )); TIMINGS+=(--timing "$STEP" "$((ms / 1000)).$(printf %03d $((ms % 1000)))"); }
fail() { echo "h200_run.sh: $STEP: $*" >&2; exit 1; }

run_all() {
    echo "h200_run.sh: repo $REPO, work $WORK, out $OUT_DIR, simulate $SIMULATE, budget ${BUDGET} s"

    step install
    # the machine's Python: $PYTHON, else the first of python3, python that has numpy (numba-cuda's)
    PY=""
    for cand in ${PYTHON:-} python3 python; do
        if command -v "$cand" >/dev/null 2>&1 && "$cand" -c "import numpy" 2>/dev/null; then PY=$cand; break; fi
    done
    [ -n "$PY" ] || fail "no Python with numpy (python3, python; or set PYTHON)"
    echo "python: $(command -v "$PY") ($("$PY" -c 'import sys; print(sys.version.split()[0])'))"
    HOW=$INSTALL
    if [ "$HOW" = auto ] || [ "$HOW" = pip ]; then
        if timeout 120 "$PY" -m pip install -q --no-index --no-deps --no-build-isolation --target "$WORK/site" "$REPO"; then
            export PYTHONPATH="$WORK/site${PYTHONPATH:+:$PYTHONPATH}"
            HOW=pip
        elif [ "$HOW" = pip ]; then
            fail "pip install --no-index --no-deps --no-build-isolation --target failed"
        else
            echo "pip install failed (no index, no build backend?): the source tree goes on PYTHONPATH instead"
            HOW=pythonpath
        fi
    fi
    if [ "$HOW" = pythonpath ]; then
        # the packages under the names pyproject.toml installs them as
        mkdir -p "$WORK/src"
        ln -sfn "$REPO/mmasim" "$WORK/src/mmasim"
        ln -sfn "$REPO/plugins" "$WORK/src/mmasim_plugins"
        ln -sfn "$REPO/archs" "$WORK/src/mmasim_archs"
        ln -sfn "$REPO/vectors" "$WORK/src/mmasim_vectors"
        export PYTHONPATH="$WORK/src${PYTHONPATH:+:$PYTHONPATH}"
    fi
    # the pure-Python dependencies the machine's Python may lack, from the wheels shipped here
    if ! "$PY" -c "import numpy, attr, pluggy; import sys; sys.version_info >= (3, 11) or __import__('tomli')" 2>/dev/null; then
        for whl in "$REPO"/tools/hardware/wheels/*.whl; do
            [ -e "$whl" ] && export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$whl"
        done
        echo "dependencies from tools/hardware/wheels"
    fi
    cd "$WORK" || fail "cannot enter $WORK"     # from here on mmasim is imported from the install, not the tree
    "$PY" -c "import mmasim, numpy; print('mmasim', mmasim.__file__, 'numpy', numpy.__version__)" \
        || fail "mmasim does not import (install: $HOW)"
    # on the GPU a harness program that runs longer than a minute has hung: it is stopped and
    # reported (the stand-in computes in software, and may take longer)
    LIMIT=60
    [ "$SIMULATE" = 1 ] && LIMIT=600
    export MMASIM_BACKEND=numpy OMP_NUM_THREADS=1 MMASIM_HARNESS_TIMEOUT=${MMASIM_HARNESS_TIMEOUT:-$LIMIT}
    export MMASIM_HARNESS_CACHE=${MMASIM_HARNESS_CACHE:-$WORK/harness-cache}
    export MMASIM_CACHE_DIR=${MMASIM_CACHE_DIR:-$WORK/mmasim-cache}
    SOURCE_SHA=$(cd "$REPO" && find mmasim plugins archs tools/hardware -type f \( -name '*.py' -o -name '*.toml' -o -name '*.sh' \) \
                 | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)
    COMMIT=${COMMIT:-source-sha256:$SOURCE_SHA}
    echo "install: $HOW; source $COMMIT"
    step_done

    step gpu
    if [ "$SIMULATE" = 0 ]; then
        nvidia-smi || fail "nvidia-smi failed"
        nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,clocks.max.sm,persistence_mode --format=csv
    else
        echo "simulate: no GPU; a stand-in program replaces each device binary"
    fi
    step_done

    step nvcc
    if [ -z "${MMASIM_NVCC:-}" ] && ! command -v nvcc >/dev/null 2>&1; then
        for cand in /usr/local/cuda/bin/nvcc /usr/local/cuda-*/bin/nvcc; do
            if [ -x "$cand" ]; then export MMASIM_NVCC=$cand; break; fi
        done
    fi
    "$PY" -c "from mmasim.harness import toolchain as t; n = t.find_nvcc('sm_90a'); print('nvcc', n.version, n.path, '(' + n.origin + ')')" \
        || { [ "$SIMULATE" = 1 ] && echo "simulate: no nvcc, the kernels are not built"; } \
        || fail "no nvcc that knows sm_90a (set MMASIM_NVCC)"
    step_done

    step generate
    INS=()
    for ((i = 0; i < ${#PASS[@]}; i++)); do
        if [ "${PASS[$i]}" = --instructions ]; then
            for ((j = i + 1; j < ${#PASS[@]}; j++)); do
                case "${PASS[$j]}" in --*) break ;; *) INS+=("${PASS[$j]}") ;; esac
            done
        fi
    done
    "$PY" -m mmasim harness generate Hopper ${INS[@]+"${INS[@]}"} --out "$WORK/kernels" || fail "mmasim harness generate failed"
    step_done

    step measure
    SIM=()
    [ "$SIMULATE" = 1 ] && SIM=(--simulate)
    # the whole process group is stopped 30 s before the deadline, so that packing always runs
    LEFT=$((DEADLINE - 30 - $(date +%s)))
    [ "$LEFT" -ge 10 ] || LEFT=10
    timeout -k 10 "$LEFT" "$PY" "$REPO/tools/hardware/h200_run.py" measure --work "$WORK" \
        --deadline "$DEADLINE" ${SIM[@]+"${SIM[@]}"} ${PASS[@]+"${PASS[@]}"}
    RC=$?
    [ $RC = 0 ] || echo "h200_run.sh: measure ended with status $RC (124: stopped at the deadline); packing what was written"
    step_done

    step pack
    "$PY" "$REPO/tools/hardware/h200_run.py" pack --work "$WORK" --out "$OUT_DIR" --commit "$COMMIT" \
        ${TIMINGS[@]+"${TIMINGS[@]}"} --started "$START" ${PASS[@]+"${PASS[@]}"} \
        || fail "packing failed"
    ls -l "$OUT_DIR"
    echo "h200_run.sh: done in $(( $(date +%s) - START )) s"
}

run_all 2>&1 | tee "$LOG"
exit "${PIPESTATUS[0]}"
