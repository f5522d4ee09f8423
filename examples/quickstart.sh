#!/usr/bin/env bash
# drover quickstart: the whole flow on one machine, no cluster needed.
#   1. build drover and drover-agent
#   2. start a local registry (docker-registry, if installed) on a free loopback
#      port — otherwise use an OCI layout directory instead of a registry
#   3. generate a signing key
#   4. publish examples/platform to the dev environment (render, build, sign, push)
#   5. run one agent per cluster type, once, applying to a directory (dir: target)
#   6. show each agent's status, then `drover inspect` and how to `oras pull`
# Everything lives in a temporary directory; processes are stopped on exit.
# NO_REGISTRY=1 forces the OCI-layout path; KEEP=1 keeps the directory.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
work=$(mktemp -d "${TMPDIR:-/tmp}/drover-quickstart.XXXXXX")
registry_pid=""
cleanup() {
  if [ -n "$registry_pid" ]; then
    # docker-registry may sit in a graceful drain on SIGTERM: give it a moment, then force.
    kill "$registry_pid" 2>/dev/null || true
    for _ in $(seq 20); do kill -0 "$registry_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$registry_pid" 2>/dev/null || true
  fi
  if [ -z "${KEEP:-}" ]; then rm -rf "$work"; else echo "kept $work"; fi
}
trap cleanup EXIT
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "building drover and drover-agent"
cargo build --quiet -p drover-bundler -p drover-agent
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
export PATH="$target_dir/debug:$PATH"
export DROVER_KEY_PASSWORD=""      # the quickstart key has an empty password

platform="$root/examples/platform"
types=$(ls "$platform/cluster-types" | sed 's/\.yaml$//')
revision=$(git -C "$platform" rev-parse --short HEAD 2>/dev/null || echo quickstart)

step "generating a signing key pair in $work/keys"
drover keygen --out-dir "$work/keys"

if [ -z "${NO_REGISTRY:-}" ] && command -v docker-registry >/dev/null 2>&1; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  mkdir -p "$work/registry"
  cat > "$work/registry/config.yml" <<CFG
version: 0.1
log: { level: error, accesslog: { disabled: true } }
storage: { filesystem: { rootdirectory: $work/registry/data } }
http: { addr: 127.0.0.1:$port }
CFG
  step "starting docker-registry on 127.0.0.1:$port"
  docker-registry serve "$work/registry/config.yml" 2>"$work/registry/log" &
  registry_pid=$!
  for _ in $(seq 100); do
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/v2/')" 2>/dev/null && break
    sleep 0.1
  done
  prefix="127.0.0.1:$port/fleet"
  step "publishing examples/platform to dev at revision $revision"
  drover publish "$platform" --env dev --registry "$prefix" --key "$work/keys/drover.key" \
    --revision "$revision" --plain-http
  source_of() { echo "$prefix/$1:dev"; }
  flags=(--plain-http)
else
  step "docker-registry is not installed: using an OCI layout at $work/layout instead"
  drover render "$platform" --env dev --out "$work/rendered"
  for t in $types; do
    digest=$(drover -o json build "$work/rendered/$t" --out "oci:$work/layout:$t-dev" \
      --cluster-type "$t" --env dev --revision "$revision" |
      python3 -c 'import json, sys; print(json.load(sys.stdin)["digest"])')
    # sign the digest we just built (a tag is only signed after it verified), then place
    # it on its channel: agents follow a channel only with a signed channel statement
    drover sign "oci:$work/layout@$digest" --key "$work/keys/drover.key"
    drover promote "oci:$work/layout@$digest" "oci:$work/layout:$t-dev" --key "$work/keys/drover.key" \
      --trust-key "$work/keys/drover.pub"
  done
  source_of() { echo "oci:$work/layout:$1-dev"; }
  flags=()
fi

for t in $types; do
  step "agent for cluster type $t: one cycle, applying to dir:$work/clusters/$t"
  drover-agent run --once --source "$(source_of "$t")" "${flags[@]}" \
    --trust-key "$work/keys/drover.pub" --expect-cluster-type "$t" --expect-environment dev \
    --target "dir:$work/clusters/$t" --state-dir "$work/state/$t" \
    2>"$work/agent-$t.log" || { echo "agent failed, log:"; cat "$work/agent-$t.log"; exit 1; }
  drover-agent status --state-dir "$work/state/$t"
done

first=$(echo "$types" | head -n1)
step "what the $first bundle holds: drover inspect $(source_of "$first")"
drover inspect "$(source_of "$first")" "${flags[@]}"

step "files the $first agent wrote"
(cd "$work/clusters/$first" && find . -type f | sort | head -20)

if [ -n "$registry_pid" ]; then
  step "inspect it with oras (pip install oras), as anyone can:"
  cat <<HINT
python3 -c 'import oras.client; oras.client.OrasClient(insecure=True).pull(target="$(source_of "$first")", outdir="out")'
oras pull --plain-http "$(source_of "$first")" -o out       # the oras CLI, if installed
skopeo inspect --raw --tls-verify=false "docker://$(source_of "$first")"
# -> out/manifests/<namespace>/<Kind>.<group>.<name>.yaml, one object per file
# (insecure=True, --plain-http, --tls-verify=false: this local registry speaks plain HTTP)
HINT
fi
echo
echo "quickstart done (set KEEP=1 to keep $work)"
