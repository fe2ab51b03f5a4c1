#!/usr/bin/env bash
# The diffusion operator and model on a GPU, in one go: at most BUDGET = 450 s of steps (7.5 min), each step
# with its own time limit so that one hang cannot eat the rest, in order of importance:
#   1. the operator/model tests on CUDA (tests/test_ops.py, tests/test_model.py, tests/test_fused.py);
#   2. `pdelra bench train-step` at Table 8's ListOps shape (L = 2000, batch 256, bf16 autocast): none against
#      after_embedding, after_mlp at h1 and multi-scale, each with the eager and the fused operator;
#      then `pdelra bench pack`: ListOps runs per hour with K = 1, 2, 4 training processes side by side on
#      the GPU (the config's `resources.pack`: kept only where K > 1 gains clearly over K = 1);
#   3. `pdelra bench layer`: the diffusion layer alone against nn.LayerNorm, eager and fused, bf16 at
#      Table 8's ListOps shape (256, 2000, 128), float32 at (4, 1024, 128) and (32, 2048, 128);
#   3b. `pdelra bench cta-block`: CTA's official block at L = 4096, d 512, 8 heads, bf16, 4 steps vs no PDE;
#   4. `pdelra plan config/config.yaml` calibrated on this GPU.
# Runs from a fresh copy of the repository with the machine's own python3 (torch with CUDA, pytest,
# hypothesis, scipy, pyyaml); the package is used from src/ (no install, no network). jsonschema is optional
# (without it `pdelra plan` reads the config unvalidated and says so).
#
# Usage, from the repository root:   OUT=/path/to/outdir bash benchmarks/gpu_check.sh
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

BUDGET=${BUDGET:-450}  # seconds for all steps together; a step gets at most what is left, none under 20 s

step() {  # step NAME SECONDS COMMAND...: run with a time limit, log to $OUT/NAME.log, one summary line
    local name=$1 limit=$2
    shift 2
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
from pdelra import plan
from pdelra.bench import cta_block, layer, pack, train_step
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
parser = argparse.ArgumentParser(prog="pdelra")
sub = parser.add_subparsers(dest="command", required=True)
bench = sub.add_parser("bench").add_subparsers(dest="benchmark", required=True)
for name, module in (("layer", layer), ("train-step", train_step), ("pack", pack), ("cta-block", cta_block)):
    p = bench.add_parser(name)
    module.add_arguments(p)
    p.set_defaults(func=module.run)
plan.register(sub)
args = parser.parse_args(sys.argv[1:])
sys.exit(args.func(args))
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
# 3b. Continuous-Time Attention's official block (post-LN encoder layer + 4 diffusion steps), forward only,
#     bf16, at the official README's setting (L 4096, d 512, 8 heads; their figure: 1.63x on an A800).
step cta_block 60 "${PDELRA[@]}" bench cta-block --device cuda --compile --json "$OUT/cta_block.json"

step plan 90 "${PDELRA[@]}" plan config/config.yaml --device cuda --steps 2 --json "$OUT/plan.json"

{
    echo
    echo "== tests"; tail -n 15 "$OUT/tests.log" 2>/dev/null
    echo "== layer (fp32)"; grep -E "^\(B, L, d\)|^path|^(eager|fused) " "$OUT/layer_fp32.log"
    echo "== layer (bf16)"; grep -E "^\(B, L, d\)|^path|^(eager|fused) " "$OUT/layer_bf16.log"
    echo "== train step"; grep -E "^L=|^variant|^after_|^diffusion layer" "$OUT/train_step.log"
    echo "== several runs per GPU"; grep -E "^ListOps|^ +K |^ +[0-9]+ " "$OUT/pack.log"
    echo "== plan"; grep -v " INFO " "$OUT/plan.log" | tail -n 12
} >>"$SUMMARY" 2>&1
cat "$SUMMARY"
