#!/usr/bin/env bash
# What the kube target's resync compare costs per object: a forced apply simulated with
# drover-ssa (structured-merge-diff, defaulting, the Go round trip) on the recorded
# scenarios, release build. Not in CI (no timed tests).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release -q -p drover-ssa --test verdict_cost -- --ignored --nocapture 2>&1 | grep -E "verdicts|test result"
