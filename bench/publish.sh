#!/usr/bin/env bash
# Publish benchmark (issue 13), release mode. Generates the synthetic fleet of
# docs/platform.md (WORKLOADS workloads x TYPES cluster types, 180 objects per type), starts
# a registry with its access log on, and times:
#   1. `drover publish` the first time (every cluster type changed),
#   2. `drover publish` again with nothing changed (requests counted from the access log:
#      HEADs and small GETs only, no write),
#   3. `drover publish` after one cluster type changed,
#   4. the peer: `skopeo sync` of the same published repositories (channel tag, history
#      tag, signature) to a fresh registry — the transfer alone, no render, build or sign.
# Usage: bench/publish.sh [TYPES] [WORKLOADS]   (default 300 20). Every command is bounded
# (timeout 600 s); registries are stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
TYPES=${1:-300}
WORKLOADS=${2:-20}
if [[ -z ${SKIP_BUILD:-} ]]; then   # SKIP_BUILD=1: use the existing binaries
  cargo build --release -p drover-bundler --bin drover --example platform_bench --quiet
fi
DROVER=${DROVER:-$PWD/target/release/drover}   # DROVER=PATH: measure another binary
WORK=$(mktemp -d)
source bench/lib.sh
cleanup() { stop_registries; rm -rf "$WORK"; }
trap cleanup EXIT
export DROVER_KEY_PASSWORD=bench
# Runs a command bounded (600 s), wall time and peak RSS (KiB) into $WORK/t.
T() { timeout 600 /usr/bin/time -f "%e %M" -o "$WORK/t" "$@"; }

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
target/release/examples/platform_bench gen "$WORK/plat" "$WORKLOADS" "$TYPES" >/dev/null
"$DROVER" keygen --out-dir "$WORK/k" >/dev/null
REG_ACCESSLOG=1 start_registry; SRC=$REG; LOG=$REG_LOG
pub() { T "$DROVER" -o json publish "$WORK/plat" --env dev --registry "$SRC/bench" --key "$WORK/k/drover.key" --plain-http --revision "$1" >"$WORK/pub.json"; }
changed() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"]; print(sum(x["changed"] for x in r), "of", len(r), "changed")' "$WORK/pub.json"; }

off=$(stat -c %s "$LOG"); pub b1; read -r s1 k1 <"$WORK/t"
echo "publish, first time:      ${s1} s, peak RSS $((k1 / 1024)) MiB, $(changed); $(count_requests "$LOG" "$off")"
off=$(stat -c %s "$LOG"); pub b1; read -r s2 k2 <"$WORK/t"
echo "publish, nothing changed: ${s2} s, peak RSS $((k2 / 1024)) MiB, $(changed); $(count_requests "$LOG" "$off")"
sed -i 's/replicas: 4/replicas: 9/' "$WORK/plat/cluster-types/ct-007.yaml"
off=$(stat -c %s "$LOG"); pub b2; read -r s3 k3 <"$WORK/t"
echo "publish, one type changed: ${s3} s, peak RSS $((k3 / 1024)) MiB, $(changed); $(count_requests "$LOG" "$off")"

if [[ ${PEER:-1} == 0 ]]; then exit 0; fi   # PEER=0: skip the (slow) skopeo side
# The peer: skopeo moving the same repositories (every tag: dev, dev-<n>, the .sig) to a
# fresh registry, as one `skopeo sync` from a YAML list.
python3 - "$SRC" "$TYPES" >"$WORK/sync.yaml" <<'PY'
import json, sys, urllib.request
reg, n = sys.argv[1], int(sys.argv[2])
print(f"{reg}:\n  tls-verify: false\n  images:")
for t in range(n):
    repo = f"bench/ct-{t:03}"
    tags = json.load(urllib.request.urlopen(f"http://{reg}/v2/{repo}/tags/list"))["tags"]
    print(f"    {repo}: [{', '.join(json.dumps(x) for x in sorted(tags))}]")
PY
start_registry; DST=$REG
T skopeo sync --src yaml --dest docker --dest-tls-verify=false "$WORK/sync.yaml" "$DST/mirror" >/dev/null 2>"$WORK/skopeo.err" || { cat "$WORK/skopeo.err"; exit 1; }
read -r ss sk <"$WORK/t"
echo "peer: skopeo sync of the ${TYPES} published repositories (every tag): ${ss} s, peak RSS $((sk / 1024)) MiB"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
