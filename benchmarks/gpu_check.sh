#!/usr/bin/env bash
# The diffusion operator and model on a GPU: at most BUDGET = 540 s of steps (9 min) per call, each step
# with its own time limit so that one hang cannot eat the rest, in order of importance:
#   1. the operator/model tests on CUDA (tests/test_ops.py, tests/test_model.py, tests/test_fused.py);
#   2. `pdelra bench train-step` at Table 8's ListOps shape (L = 2000, batch 256, bf16 autocast): none against
#      after_embedding, after_mlp at h1 and multi-scale, each with the eager and the fused operator;
#      then `pdelra bench pack`: ListOps runs per hour with K = 1, 2, 4 training processes side by side on
#      the GPU (the config's `resources.pack`: kept only where K > 1 gains clearly over K = 1);
#   3. `pdelra bench layer`: the diffusion layer alone against nn.LayerNorm, eager and fused, bf16 at
#      Table 8's ListOps shape (256, 2000, 128), float32 at (4, 1024, 128) and (32, 2048, 128);
#   2c. the compiled whole model's step time, and bucketed batches' step time at ListOps' and Text's lengths;
#   3b. `pdelra bench cta-block`: CTA's official block at L = 4096, d 512, 8 heads, bf16, 4 steps vs no PDE;
#   4. `pdelra plan config/config.yaml` calibrated on this GPU.
# Runs from a fresh copy of the repository with the machine's own python3 (torch with CUDA, pytest,
# hypothesis, scipy, pyyaml); the package is used from src/ (no install, no network). jsonschema is optional
# (without it `pdelra plan` reads the config unvalidated and says so).
#
# Usage, from the repository root:   OUT=/path/to/outdir [BUDGET=540] [STEPS="..."] bash benchmarks/gpu_check.sh
# All steps together need ~18 minutes; a device call gets at most 10, so run them in two calls (STEPS below).
# Outputs: $OUT/*.log (each step's full output), $OUT/*.json (benchmark figures, the plan), $OUT/summary.txt.
set -u

OUT=${OUT:-gpu_check_out}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-/tmp/pdelra_inductor}"
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"

BUDGET=${BUDGET:-540}  # seconds for the selected steps together (a device call: 600 s); a step gets at most what is left, none under 20 s

# STEPS="a b ..." runs only the named steps (in the script's order), e.g. the cost figures of the plan in one
# call and the rest in another: STEPS="environment pack compile buckets_listops buckets_text plan".
STEPS=${STEPS:-}
KNOWN_STEPS=""

step() {  # step NAME SECONDS COMMAND...: run with a time limit, log to $OUT/NAME.log, one summary line
    local name=$1 limit=$2
    shift 2
    KNOWN_STEPS="$KNOWN_STEPS $name"
    if [ -n "$STEPS" ] && [[ " $STEPS " != *" $name "* ]]; then
        return
    fi
    local left=$((BUDGET - SECONDS))
    if [ "$left" -lt 20 ]; then
        echo "$name: SKIPPED (budget of $BUDGET s spent)" | tee -a "$SUMMARY"
        return
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    local start=$SECONDS
    timeout --kill-after=10 "$limit" "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    local note=""
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then note=" (TIMED OUT at ${limit} s)"; fi
    echo "$name: exit $rc after $((SECONDS - start)) s$note" | tee -a "$SUMMARY"
}

# `pdelra bench …` / `pdelra plan …` through their own modules only (the full CLI also loads the workflow's
# modules, which need packages a bare GPU image may lack).
PDELRA=("$PY" -c '
import argparse, logging, sys
from pdelra.bench import cli as bench_cli
from pdelra.cli import handler_of
from pdelra.planning import cli as planning_cli
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
parser = argparse.ArgumentParser(prog="pdelra")
sub = parser.add_subparsers(dest="command", required=True)
bench_cli.register(sub)
planning_cli.register_plan(sub)
args = parser.parse_args(sys.argv[1:])
sys.exit(handler_of(args)(args))
')

step environment 30 bash -c "nvidia-smi; $PY -c 'import torch, sys; print(sys.version); print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, torch.cuda.is_available(), torch.cuda.get_device_name(0))'; $PY -c 'import triton; print(\"triton\", triton.__version__)'"

# 1. Tests on CUDA: PDELRA_TEST_DEVICE makes new tensors default to the GPU (tests/conftest.py); the fused
#    operator is compiled (Triton) in tests/test_fused.py, run eagerly elsewhere.
step tests 150 env PDELRA_TEST_DEVICE=cuda "$PY" -m pytest -q -p no:cacheprovider -o timeout=140 \
    tests/test_ops.py tests/test_model.py tests/test_fused.py

# 2. Full train step at Table 8's ListOps shape, bf16 autocast (the first, untimed round compiles).
step train_step 170 "${PDELRA[@]}" bench train-step --device cuda --lengths 2000 --batch-size 256 \
    --autocast bf16 --variants after_embedding after_mlp --scales h1 multi --paths eager fused \
    --rounds 5 --warmup 1 --json "$OUT/train_step.json"

# 2b. Several runs per GPU: K ListOps training processes at Table 8's shape side by side, 15 s timed per K
#     after a warm-up (the first compiles the fused operator; the others find it in the inductor cache).
step pack 150 "${PDELRA[@]}" bench pack --device cuda --packs 1 2 4 --seconds 15 --json "$OUT/pack.json"

# 3. The layer alone against LayerNorm: bf16 at Table 8's ListOps shape, float32 at the two reference shapes.
step layer_bf16 80 "${PDELRA[@]}" bench layer --device cuda --shapes 256x2000x128 --dtype bfloat16 \
    --scales h1 multi --rounds 20 --warmup 2 --json "$OUT/layer_bf16.json"
step layer_fp32 80 "${PDELRA[@]}" bench layer --device cuda --shapes 4x1024x128 32x2048x128 \
    --scales h1 multi --rounds 20 --warmup 2 --json "$OUT/layer_fp32.json"

# 4. The full reproduction's cost, calibrated on this GPU (each task's baseline at its full batch, bf16).
# 2c. The compiled whole model (train.compile): fused against compiled, both against the same eager `none`
#     step, at Table 8's ListOps shape; and length-bucketed batches' step time at ListOps' (500-2000 tokens,
#     batch 256) and Text's (IMDb bytes, ~250-4000, batch 128) length distributions.
step compile 150 "${PDELRA[@]}" bench train-step --device cuda --lengths 2000 --batch-size 256 \
    --autocast bf16 --variants after_embedding --scales h1 --paths fused compiled \
    --rounds 5 --warmup 2 --json "$OUT/compile.json"
step buckets_listops 60 "${PDELRA[@]}" bench buckets --device cuda --min-length 500 --max-length 2000 \
    --batch-size 256 --json "$OUT/buckets_listops.json"
step buckets_text 60 "${PDELRA[@]}" bench buckets --device cuda --min-length 250 --max-length 4000 \
    --batch-size 128 --json "$OUT/buckets_text.json"

# 3b. Continuous-Time Attention's official block (post-LN encoder layer + 4 diffusion steps), forward only,
#     bf16, at the official README's setting (L 4096, d 512, 8 heads; their figure: 1.63x on an A800).
step cta_block 60 "${PDELRA[@]}" bench cta-block --device cuda --compile --json "$OUT/cta_block.json"

step plan 90 "${PDELRA[@]}" plan config/config.yaml --device cuda --steps 2 --json "$OUT/plan.json"

for wanted in $STEPS; do  # a misspelt step would otherwise be skipped without a word
    [[ " $KNOWN_STEPS " == *" $wanted "* ]] || echo "STEPS: no step named '$wanted' (steps:$KNOWN_STEPS)" | tee -a "$SUMMARY"
done
{
    show() {  # show TITLE LOG PATTERN: the matching lines of a step's log, when that step ran
        [ -f "$OUT/$2.log" ] || return 0
        echo "== $1"
        if [ -n "$3" ]; then grep -E "$3" "$OUT/$2.log"; else tail -n 15 "$OUT/$2.log"; fi
    }
    echo
    show tests tests ""
    show "layer (fp32)" layer_fp32 "^\(B, L, d\)|^path|^(eager|fused) "
    show "layer (bf16)" layer_bf16 "^\(B, L, d\)|^path|^(eager|fused) "
    show "train step" train_step "^L=|^variant|^after_|^diffusion layer"
    show "several runs per GPU" pack "^ListOps|^ +K |^ +[0-9]+ "
    show "the compiled model" compile "^L=|^variant|^after_"
    show "bucketed batches, ListOps lengths" buckets_listops "ratio|bucket|plain"
    show "bucketed batches, Text lengths" buckets_text "ratio|bucket|plain"
    show "CTA's official block" cta_block "^CTA|^path|^(eager|compiled) "
    show plan plan ""
} >>"$SUMMARY" 2>&1
cat "$SUMMARY"
