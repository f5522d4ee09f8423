#!/usr/bin/env bash
# The README's command walkthrough ("CLI reference by example"), run exactly as written
# against local registries: keygen, render, build, push, sign, verify, inspect, pull,
# diff, publish dev/staging/prod, releases, promote, rollback, export, import, and an
# agent from the registry and from the archive, then status, history and fleet status.
#
# The block between the "walkthrough" markers below IS the README's block, line for
# line; tests/tests/walkthrough.rs runs this script and fails when the two differ.
#
#   REGISTRY=HOST:PORT  AIRGAP=HOST:PORT   use these (plain-HTTP) registries; otherwise
#                                          two docker-registry processes are started on
#                                          free loopback ports and stopped on exit
#   DROVER_BIN=DIR                         where drover and drover-agent are (default:
#                                          built with cargo)
#   KEEP=1                                 keep the work directory
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/drover-walkthrough.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do
    kill "$p" 2>/dev/null || true
    for _ in $(seq 20); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
  if [ -z "${KEEP:-}" ]; then rm -rf "$work"; else echo "kept $work"; fi
}
trap cleanup EXIT

start_registry() { # NAME -> prints HOST:PORT
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  mkdir -p "$work/$1"
  cat > "$work/$1/config.yml" <<CFG
version: 0.1
log: { level: error, accesslog: { disabled: true } }
storage: { filesystem: { rootdirectory: $work/$1/data } }
http: { addr: 127.0.0.1:$port }
CFG
  docker-registry serve "$work/$1/config.yml" 2>"$work/$1/log" &
  pids+=($!)
  for _ in $(seq 100); do
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/v2/')" 2>/dev/null && break
    sleep 0.1
  done
  REGISTRY_STARTED="127.0.0.1:$port"
}

if [ -z "${REGISTRY:-}" ]; then start_registry registry; REGISTRY=$REGISTRY_STARTED; fi
if [ -z "${AIRGAP:-}" ]; then start_registry airgap; AIRGAP=$REGISTRY_STARTED; fi
if [ -z "${DROVER_BIN:-}" ]; then
  (cd "$root" && cargo build --quiet -p drover-bundler -p drover-agent)
  DROVER_BIN=$(cd "$root" && cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/debug
fi
export PATH="$DROVER_BIN:$PATH"

# What the README leaves to the reader: the registries, the platform in git, the key
# password, and plain HTTP for local registries.
export DROVER_KEY_PASSWORD=""
export DROVER_PLAIN_HTTP=true
REG="$REGISTRY/fleet"
SOVEREIGN="$AIRGAP/fleet"
cd "$work"
cp -r "$root/examples/platform" platform
git -C platform init -q
git -C platform add -A
git -C platform -c user.name=walkthrough -c user.email=walkthrough@example.com commit -qm platform
GIT_SHA=$(git -C platform rev-parse HEAD)
set -x

# --- walkthrough begin ---
# keys (cosign's encrypted format; password from DROVER_KEY_PASSWORD, else COSIGN_PASSWORD)
drover keygen --out-dir keys            # keys/drover.key (0600), keys/drover.pub (0644)
drover keygen --out-dir keys/second     # a second signer, for two-party release

# render the platform model (Kalypso-style: cluster types, environments, workloads, values)
drover render platform/ --env staging --out rendered-staging/
drover render platform/ --env prod --out rendered/    # rendered/<cluster-type>/manifests/...

# bundles from one cluster type's rendered YAML (any directory of YAML: Helm, Kustomize output)
drover build rendered/edge-small --out oci:layout --cluster-type edge-small --env prod
drover push rendered-staging/edge-small "$REG/edge-small:prod" --key keys/drover.key \
    --cluster-type edge-small --env prod --sequence 41 --revision "$GIT_SHA"
drover push rendered/edge-small "$REG/edge-small:prod" --key keys/drover.key \
    --cluster-type edge-small --env prod --sequence 42 --revision "$GIT_SHA"
drover sign "$REG/edge-small:prod" --key keys/second/drover.key --trust-key keys/drover.pub   # verifies, then signs
drover verify "$REG/edge-small:prod" --trust-key keys/drover.pub --trust-key keys/second/drover.pub --threshold 2
drover inspect "$REG/edge-small:prod" | head -4     # every command's output pipes
drover pull "$REG/edge-small:prod" --out edge
drover diff "$REG/edge-small:prod-41" "$REG/edge-small:prod" || echo "they differ (exit $?)"
drover diff rendered/edge-small "$REG/edge-small:prod"    # exit 0: the same objects

# any OCI tool reads a bundle (these flags are for a plain-HTTP registry; drop them for TLS)
python3 -c 'import oras.client, sys; oras.client.OrasClient(insecure=True).pull(target=sys.argv[1], outdir="out")' "$REG/edge-small:prod"
ls out/manifests/*/
skopeo inspect --raw --tls-verify=false "docker://$REG/edge-small:prod"

# publish every cluster type, environment by environment (a signed release record each)
drover publish platform/ --env dev --registry "$REG" --key keys/drover.key
drover publish platform/ --env staging --registry "$REG" --key keys/drover.key
drover publish platform/ --env prod --registry "$REG" --key keys/drover.key   # refused unless staging was published at this revision
drover releases --registry "$REG" --trust-key keys/drover.pub                  # what revision each environment is at
drover inspect "$REG/drover-releases:prod"

# rings and rollback
drover promote "$REG/edge-small:prod" prod-ring0 --key keys/drover.key --trust-key keys/drover.pub   # signs prod-ring0's channel statement
drover rollback "$REG/edge-small:prod" --to prod-41 --key keys/drover.key      # prod-41 must verify

# air gap
drover export "$REG/edge-small:prod-ring0" "$REG/cloud-standard:prod" --out prod.tar
drover import prod.tar --to "$SOVEREIGN" --trust-key keys/drover.pub --trust-key keys/second/drover.pub
    # -> $SOVEREIGN/edge-small, $SOVEREIGN/cloud-standard; signatures no trusted key verifies are left out

# one agent per cluster (here: one cycle into a directory), from a registry or the archive itself
drover-agent run --once --source "$SOVEREIGN/edge-small:prod-ring0" --trust-key keys/drover.pub \
    --expect-cluster-type edge-small --expect-environment prod \
    --target dir:clusters/edge-small --state-dir state/edge-small \
    --cluster-name factory-1     # reports to $SOVEREIGN/drover-reports after each poll
drover-agent run --once --source "oci-archive:prod.tar:fleet/cloud-standard:prod" --trust-key keys/drover.pub \
    --expect-cluster-type cloud-standard --expect-environment prod \
    --target dir:clusters/cloud-standard --state-dir state/cloud-standard
drover-agent status --state-dir state/edge-small       # the agent of this state directory
drover-agent history --state-dir state/cloud-standard -o json   # the last 20 attempts (--limit N)
drover fleet enroll --fleet platform/fleet.yaml --registry "$SOVEREIGN" --all-pending   # declare each cluster and its report key (a diff to review)
drover fleet status --registry "$SOVEREIGN" --fleet platform/fleet.yaml --trust-key keys/drover.pub   # every declared cluster: class, sequence, health, last result
# --- walkthrough end ---

set +x
echo "walkthrough done"
