#!/usr/bin/env bash
# certgate end to end on the embedded default (a local sqlite store, no server):
# register a biased credit-scoring classifier as `candidate`, audit and gate it (it fails:
# nothing is promoted); register a fair one, audit and gate it (it passes: `champion` moves).
# Everything is written under ./demo_out (override with CERTGATE_DEMO_DIR).
set -euo pipefail

examples="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$examples")"
work="${CERTGATE_DEMO_DIR:-$PWD/demo_out}"
rm -rf "$work"
mkdir -p "$work"
cd "$work"

export MLFLOW_TRACKING_URI="sqlite:///$work/mlflow.db"
export MLFLOW_DISABLE_TELEMETRY=true
export MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR=false
export PYTHONWARNINGS="ignore"
config="$root/configs/demo.yaml"

run_pipeline() {  # $1: the gate's expected exit code
    local status=0
    certgate run --config "$config" --report-dir "$work/reports" || status=$?
    if [[ "$status" != "$1" ]]; then
        echo "demo: expected exit code $1 from certgate run, got $status" >&2
        exit 1
    fi
}

echo "== 1. a biased classifier becomes the candidate"
python "$examples/demo_register.py" --variant biased
echo "== 2. certgate run: audit + gate (expected: proven violation, gate fails, exit 1)"
run_pipeline 1
echo "== 3. a fair classifier becomes the candidate"
python "$examples/demo_register.py" --variant fair
echo "== 4. certgate run: audit + gate (expected: proven pass, champion moves, exit 0)"
run_pipeline 0
echo "== 5. the registry now"
python "$examples/demo_summary.py"
echo
echo "HTML reports: $work/reports/"
echo "Browse everything: mlflow ui --backend-store-uri sqlite:///$work/mlflow.db"
