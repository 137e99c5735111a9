#!/usr/bin/env bash
# One-shot GPU throughput-profile collection (docs/profiles.md, "Collecting a profile").
#
# Run from the repository root on a machine with a CUDA GPU:
#     OUT=/some/folder bash tools/collect_gpu_profile.sh
# (on the project's device machine, $OUT is set for you and its files come back).
#
# Writes into $OUT:
#   measured.json           the measured profile (lyra-gym-profiles/1; one GPU type, its reference)
#   measured_<gpu>.json     the same file under its shipping name: copy it to lyra_gym/data/
#   merged_builtin.json     the built-in profile plus the measured GPU type (v100 stays the reference)
#   collect.log, nvidia-smi.csv
#
# Knobs (environment): PYTHON (default python3), STEPS (20), WARMUP (5), MODELS (all),
# DEVICE (cuda), EXTRA (more collector options, e.g. "--tiny" for a CPU dry run with DEVICE=cpu).
set -euo pipefail

OUT="${OUT:-collect-out}"
PY="${PYTHON:-python3}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1

# The collector needs only torch and lyra_gym's standard-library modules. A bare GPU image may lack
# the package's other dependencies (gymnasium, imported by lyra_gym/__init__.py), so fall back to
# loading lyra_gym as a plain namespace from this checkout without running its __init__.
collector() {
  "$PY" - "$@" <<'PYEOF'
import pathlib, sys, types
try:
    import lyra_gym  # noqa: F401  (installed with all its dependencies)
except ImportError:
    for name in [m for m in sys.modules if m == "lyra_gym" or m.startswith("lyra_gym.")]:
        del sys.modules[name]
    pkg = types.ModuleType("lyra_gym")
    pkg.__path__ = [str(pathlib.Path.cwd() / "lyra_gym")]
    sys.modules["lyra_gym"] = pkg
from lyra_gym.collector.cli import main
sys.exit(main(sys.argv[1:]))
PYEOF
}

{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true; } > "$OUT/nvidia-smi.csv" 2>&1
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())" \
  | tee "$OUT/collect.log"

set -o pipefail
collector --device "${DEVICE:-cuda}" --models "${MODELS:-all}" --amp --steps "${STEPS:-20}" --warmup "${WARMUP:-5}" \
  ${EXTRA:-} --out "$OUT/measured.json" 2>&1 | tee -a "$OUT/collect.log"
collector --from-measured "$OUT/measured.json" --merge-into builtin --out "$OUT/merged_builtin.json" --quiet \
  2>&1 | tee -a "$OUT/collect.log"

KEY=$("$PY" -c "import json, sys; print(json.load(open(sys.argv[1]))['metadata']['reference_gpu'])" "$OUT/measured.json")
cp "$OUT/measured.json" "$OUT/measured_${KEY}.json"
echo "done: copy $OUT/measured_${KEY}.json to lyra_gym/data/measured_${KEY}.json" | tee -a "$OUT/collect.log"
