#!/usr/bin/env bash
# The one command of a session lent an H200: every Hopper instruction measured (h200_run.sh) and
# the CUDA backend's device script (benchmarks/gpu.py) in one budget, what comes back packed into
# at most 8 files (what the lent machine returns; docs/harness.md, "Running on a lent H200").
#
#   bash tools/hardware/device_session.sh --out "$OUT" --commit SHA [--budget 420]
#   bash tools/hardware/device_session.sh --simulate --out DIR [--budget S] [--gpu-parts P,Q] [h200_run.sh options]
#
# --budget (default 420 s, from the start): 55% to h200_run.sh (its own deadlines inside), then
# benchmarks/gpu.py with what is left less 20 s (its parts share it in their proportions), run
# against the install h200_run.sh made.  Out: OUT/h200-hopper-vectors.partNN.tar.xz (at most six),
# OUT/h200_summary.json and OUT/session.tar.xz (h200_run.log, gpu/gpu.json, gpu/gpu.log, this
# script's log).  --simulate: both rehearsed without a GPU (h200_run.sh's stand-in, gpu.py in
# numba-cuda's simulator).  Other options go to h200_run.sh (--instructions, --min-cases, ...).
# Exit status: h200_run.sh's if it failed, else gpu.py's.
set -uo pipefail

START=$(date +%s)
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT_DIR=${OUT:-}
BUDGET=420
SIMULATE=()
GPU_PARTS=()
PASS=()

refuse() { echo "device_session.sh: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
    case "$1" in
        --out) [ $# -ge 2 ] || refuse "--out needs a folder"; OUT_DIR=$2; shift ;;
        --budget) [ $# -ge 2 ] || refuse "--budget needs seconds"; BUDGET=$2; shift ;;
        --gpu-parts) [ $# -ge 2 ] || refuse "--gpu-parts needs a comma-separated list"; GPU_PARTS=(--parts "$2"); shift ;;
        --simulate) SIMULATE=(--simulate) ;;
        -h|--help) sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) PASS+=("$1") ;;
    esac
    shift
done
case "$BUDGET" in ''|*[!0-9]*) refuse "--budget must be a whole number of seconds, not '$BUDGET'" ;; esac
[ "$BUDGET" -ge 120 ] || refuse "--budget $BUDGET: give both steps at least 120 s"
[ -n "$OUT_DIR" ] || refuse "no output folder: pass --out DIR (or set OUT)"
mkdir -p "$OUT_DIR" || refuse "cannot create the output folder $OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/device-session.XXXXXX")
STAGE="$WORK/session"
mkdir -p "$STAGE/gpu"
H200_BUDGET=$((BUDGET * 55 / 100))

{
    echo "device_session.sh: budget $BUDGET s (h200_run.sh $H200_BUDGET s), out $OUT_DIR, work $WORK"
    bash "$REPO/tools/hardware/h200_run.sh" --out "$OUT_DIR" --work "$WORK/h200" --budget "$H200_BUDGET" \
        ${SIMULATE[@]+"${SIMULATE[@]}"} ${PASS[@]+"${PASS[@]}"} > "$WORK/h200.out" 2>&1
    H200_RC=$?
    tail -n 5 "$WORK/h200.out"
    echo "device_session.sh: h200_run.sh exit $H200_RC at t+$(( $(date +%s) - START )) s"

    # benchmarks/gpu.py against the install h200_run.sh made (pip --target, else the tree's symlinks)
    if [ -d "$WORK/h200/site/mmasim" ]; then SITE="$WORK/h200/site"; else SITE="$WORK/h200/src"; fi
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
    PY=${PYTHON:-python3}
    GPU_BUDGET=$((BUDGET - ($(date +%s) - START) - 20))
    [ "$GPU_BUDGET" -ge 30 ] || GPU_BUDGET=30
    echo "device_session.sh: benchmarks/gpu.py, budget $GPU_BUDGET s, mmasim from $SITE"
    (cd "$WORK" && "$PY" "$REPO/benchmarks/gpu.py" --out "$STAGE/gpu" --budget "$GPU_BUDGET" \
        ${SIMULATE[@]+"${SIMULATE[@]}"} ${GPU_PARTS[@]+"${GPU_PARTS[@]}"}) > "$WORK/gpu.out" 2>&1
    GPU_RC=$?
    tail -n 3 "$WORK/gpu.out"
    echo "device_session.sh: gpu.py exit $GPU_RC at t+$(( $(date +%s) - START )) s"
} > "$STAGE/device_session.log" 2>&1

# at most 8 files come back: the vector parts, the summary, and one archive of the rest
[ -f "$OUT_DIR/h200_run.log" ] && mv "$OUT_DIR/h200_run.log" "$STAGE/"
cp "$WORK/h200.out" "$STAGE/h200_run.out" 2>/dev/null
cp "$WORK/gpu.out" "$STAGE/gpu/gpu.out" 2>/dev/null
tar -cJf "$OUT_DIR/session.tar.xz" -C "$WORK" session || { echo "device_session.sh: packing failed" >&2; exit 1; }
cat "$STAGE/device_session.log"
ls -l "$OUT_DIR"
H200_RC=$(sed -n 's/^device_session.sh: h200_run.sh exit \([0-9]*\).*/\1/p' "$STAGE/device_session.log")
GPU_RC=$(sed -n 's/^device_session.sh: gpu.py exit \([0-9]*\).*/\1/p' "$STAGE/device_session.log")
[ "${H200_RC:-1}" = 0 ] || exit "${H200_RC:-1}"
exit "${GPU_RC:-1}"
