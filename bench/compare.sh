#!/usr/bin/env bash
# What the resync's compare of one object costs against its size (issue 36): for each
# hostile shape a tenant can make an API server store — env items on a Deployment,
# finalizers, managedFields entries, one entry's fields, one entry's depth — the time to
# read and decide one object and the heap it holds at its peak, release build, in
# process (drover-ssa). Linear work shows as a flat "per item" column down a shape.
# Not in CI (no timed tests). One shape: SHAPE="env items" (finalizers, managers,
# members, depth) bench/compare.sh.
#
# The agent as a whole (peak RSS and CPU of one resync per shape, under a 512 MiB
# prlimit cap, against the FAKE API server):
#   AGENT=1 bench/compare.sh          # release binaries of this checkout
#   AGENT=1 BINS=/dir bench/compare.sh   # other binaries (e.g. the code before a change)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release -q -p drover-ssa --test compare_cost -- --ignored --nocapture 2>&1 | grep -vE "^(running|test |$)|test result"
if [[ -n ${AGENT:-} ]]; then
  cargo build --release -q --workspace --bins
  export DROVER_TEST_BINS=${BINS:-$PWD/target/release}
  cargo test -q -p drover-tests --test kube_hostile_cost -- --nocapture --test-threads=1 2>&1 | grep -E "peak|CPU|healthz|test result"
fi
