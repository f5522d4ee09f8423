#!/usr/bin/env bash
# Untrusted reports cost little (issue 31 item 5, docs/fleet.md "Numbers"), release mode,
# not in CI. Bounded: one layout written, four reads, each under a 1 GiB data cap and a
# 10-minute timeout; everything stops by itself (about a minute at the default).
# A writer without a key floods a reports repository with N unsigned reports (default
# 10,000), each within the format's limits and full of escape sequences (what
# tests/tests/fleet_untrusted_many.rs writes), handed over as an OCI layout (`--reports
# oci:DIR`, what the carrier of an archive gives). Prints, for `drover fleet view` (judged
# against the roster: every report untrusted) and `drover fleet status -o json --fleet`
# (judged against a Fleet file that declares none of them): wall time, CPU, peak RSS
# (goal < 256 MiB) and, for the page, its size (goal < 2 MiB); and the floor, the layout's
# bytes read by `cat`.
# Usage: bench/fleet-untrusted.sh            N=10000  DROVER=path (default: the release build)
#        BEFORE=path-to-an-older-drover also runs that binary side by side (its numbers
#        before this change; an older binary has no --fleet: its status row fails).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-10000}
[[ -n ${SKIP_BUILD:-} || -n ${DROVER:-} ]] || cargo build --release -p drover-bundler --bin drover --quiet
DROVER=${DROVER:-$PWD/target/release/drover}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
CAP=$((1 << 30))

# The flood: N unsigned reports in one layout (ref names = report tags), written by
# Python's hashlib (seconds, not minutes).
python3 - "$WORK/flood" "$N" <<'EOF'
import json, hashlib, base64, os, sys, time
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d + "/blobs/sha256")
open(d + "/oci-layout", "w").write('{"imageLayoutVersion":"1.0.0"}')
msg = ("\x1b[32mHealthy\x1b[0m\x07" * 30)[:300]
now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
index = []
def put(b):
    h = hashlib.sha256(b).hexdigest()
    open(d + "/blobs/sha256/" + h, "wb").write(b)
    return "sha256:" + h
for i in range(n):
    body = json.dumps({"schemaVersion": 1, "clusterName": "flood-%05d" % i, "clusterType": "edge", "environment": "prod", "channel": "prod-ring0",
        "health": "Healthy", "healthSince": "2026-01-01T00:00:00Z", "agentVersion": "9" * 60, "reportedAt": now,
        "failing": [{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "ns", "name": "web-%d" % k, "state": "Degraded", "message": msg} for k in range(5)]}).encode()
    m = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json", "artifactType": "application/vnd.drover.report.v1",
        "config": {"mediaType": "application/vnd.drover.report.v1+json", "digest": put(body), "size": len(body), "data": base64.b64encode(body).decode()},
        "layers": []}).encode()
    index.append({"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": put(m), "size": len(m), "artifactType": "application/vnd.drover.report.v1",
        "annotations": {"org.opencontainers.image.ref.name": "edge.flood-%05d" % i}})
json.dump({"schemaVersion": 2, "manifests": index}, open(d + "/index.json", "w"))
EOF
printf 'the flood: %d unsigned reports, %d MiB of layout\n' "$N" "$(( $(du -sk "$WORK/flood" | cut -f1) / 1024 ))"

# The release key (for the roster judge) and a Fleet file declaring none of the flood.
DROVER_KEY_PASSWORD= "$DROVER" keygen --out-dir "$WORK/keys" >/dev/null 2>&1
mkdir -p "$WORK/platform/cluster-types"
printf 'apiVersion: drover.dev/v1\nkind: ClusterType\nmetadata: {name: edge}\n' >"$WORK/platform/cluster-types/edge.yaml"
printf '# The bench fleet.\napiVersion: drover.dev/v1\nkind: Fleet\nspec:\n  environments: [prod]\n  clusters: []\n' >"$WORK/platform/fleet.yaml"

load() { printf '%s (1/5/15 min) on %s cores' "$(cut -d' ' -f1-3 /proc/loadavg)" "$(nproc)"; }
echo "load average before: $(load)"
# run LABEL BINARY ARGS...: under the data cap; prints time, CPU, peak RSS, exit code.
run() {
  local label=$1 bin=$2; shift 2
  set +e
  /usr/bin/time -f '%e %U %S %M' -o "$WORK/t" timeout 600 prlimit --data=$CAP "$bin" "$@" >"$WORK/out" 2>"$WORK/err"
  local rc=$?
  set -e
  # (GNU time writes "Command exited with non-zero status N" first when it fails.)
  read -r secs user sys rss < <(tail -n1 "$WORK/t") || true
  printf '%-44s exit %d, %6.2f s, CPU %6.2f s, peak RSS %4d MiB' "$label" "$rc" "$secs" "$(echo "$user + $sys" | bc)" "$((rss / 1024))"
}
for which in now ${BEFORE:+before}; do
  bin=$DROVER; [[ $which == before ]] && bin=$BEFORE
  rm -f "$WORK/page.html"
  run "[$which] fleet view (roster, --trust-key)" "$bin" fleet view --reports "oci:$WORK/flood" --trust-key "$WORK/keys/drover.pub" --out "$WORK/page.html"
  printf ', page %d KiB (goal < 2048)\n' "$(( $(stat -c %s "$WORK/page.html" 2>/dev/null || echo 0) / 1024 ))"
  run "[$which] fleet status -o json (roster)" "$bin" -o json fleet status --reports "oci:$WORK/flood" --trust-key "$WORK/keys/drover.pub"
  printf ', output %d KiB\n' "$(( $(stat -c %s "$WORK/out") / 1024 ))"
  run "[$which] fleet status -o json --fleet" "$bin" -o json fleet status --reports "oci:$WORK/flood" --fleet "$WORK/platform/fleet.yaml"
  printf ', output %d KiB; counted %s, named %s\n' "$(( $(stat -c %s "$WORK/out") / 1024 ))" \
    "$(jq '.untrusted.reports // "-"' "$WORK/out" 2>/dev/null || echo -)" "$(jq '.untrusted.named | length' "$WORK/out" 2>/dev/null || echo -)"
done
/usr/bin/time -f '%e' -o "$WORK/t" sh -c "find '$WORK/flood' -type f -print0 | xargs -0 cat >/dev/null"
printf 'floor: the layout read by cat: %.2f s\n' "$(cat "$WORK/t")"
echo "load average at the end: $(load)"
