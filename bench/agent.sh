#!/usr/bin/env bash
# Agent benchmarks (issue 4), release mode. Generates its own 1,000-object bundle, starts
# its own registry on a free loopback port, runs drover-agent against it and stops
# everything by itself. Prints:
#   1. peak RSS (VmHWM) of drover-agent from start through the first apply of 1,000 objects
#      (goal <= 20 MiB)
#   2. idle RSS (VmRSS) after the first apply and some unchanged polls (goal <= 12 MiB)
#   3. requests per unchanged poll are proven by tests/tests/agent_resilience.rs
#   4. peak RSS of `drover-agent run --once` refusing an unsigned bundle whose layer is
#      45 MiB of random bytes, pushed with skopeo (not drover) (goal < 20 MiB: signatures
#      are checked before anything is downloaded; tests/tests/agent_trust.rs proves the
#      layer is never requested)
# Usage: bench/agent.sh [OBJECTS]   (default 1000)
#        AGENT_ARGS="--cluster-name bench-1 --report-interval 2s" bench/agent.sh   (extra
#        flags for the measured agent; this one adds fleet reports, docs/fleet.md)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000}
# The agent alone, as it ships (agent/build.rs's link order applies to it and to the workspace build).
[[ -n ${SKIP_BUILD:-} ]] || { cargo build --release -p drover-bundler --quiet && cargo build --release -p drover-agent --quiet; }
DROVER=$PWD/target/release/drover
AGENT=$PWD/target/release/drover-agent
WORK=$(mktemp -d)
source bench/lib.sh
AGENT_PID=""
cleanup() {
  [[ -n $AGENT_PID ]] && kill "$AGENT_PID" 2>/dev/null
  stop_registries
  rm -rf "$WORK"
}
trap cleanup EXIT
kib() { awk -v k="$1" '$1==k":" {print $2}' "/proc/$AGENT_PID/status"; }

start_registry
REF="$REG/fleet/bench:prod"

# Input: N objects, a realistic mix (Deployments, Services, ConfigMaps) across 10 namespaces.
python3 - "$WORK/in" "$N" <<'PY'
import os, sys
out, n = sys.argv[1], int(sys.argv[2])
os.makedirs(out)
for i in range(n):
    ns = f"team-{i % 10}"
    k = i % 3
    if k == 0:
        doc = f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: app-{i}, namespace: {ns}, labels: {{app: app-{i}}}}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: app-{i}}}}}
  template:
    metadata: {{labels: {{app: app-{i}}}}}
    spec:
      containers:
      - name: main
        image: registry.example/app:{i}
        ports: [{{containerPort: 8080}}]
        env: [{{name: MODE, value: prod}}, {{name: INDEX, value: "{i}"}}]
        resources: {{requests: {{cpu: 100m, memory: 128Mi}}, limits: {{memory: 256Mi}}}}
"""
    elif k == 1:
        doc = f"""apiVersion: v1
kind: Service
metadata: {{name: svc-{i}, namespace: {ns}}}
spec:
  selector: {{app: app-{i}}}
  ports: [{{port: 80, targetPort: 8080}}]
"""
    else:
        doc = f"""apiVersion: v1
kind: ConfigMap
metadata: {{name: cfg-{i}, namespace: {ns}}}
data:
  config.yaml: |
    index: {i}
    feature_flags: [a, b, c]
    {"padding: " + "x" * 400}
"""
    open(f"{out}/obj-{i}.yaml", "w").write(doc)
PY
DROVER_KEY_PASSWORD= "$DROVER" keygen --out-dir "$WORK/keys" >/dev/null 2>&1
DROVER_KEY_PASSWORD= "$DROVER" push "$WORK/in" "$REF" --plain-http --sequence 1 --cluster-type bench --environment prod --key "$WORK/keys/drover.key" >/dev/null 2>&1

listen="127.0.0.1:$(free_port)"
"$AGENT" run --source "$REF" --plain-http --trust-key "$WORK/keys/drover.pub" --expect-cluster-type bench \
  --expect-environment prod --target "dir:$WORK/out" --state-dir "$WORK/state" --listen "$listen" \
  --interval 1s ${AGENT_ARGS:-} 2>"$WORK/agent.log" &
AGENT_PID=$!
start=$(date +%s.%N)
for _ in $(seq 600); do curl -fsS "http://$listen/readyz" >/dev/null 2>&1 && break; sleep 0.05; done
end=$(date +%s.%N)
curl -fsS "http://$listen/readyz" >/dev/null || { echo "agent never became ready"; cat "$WORK/agent.log"; exit 1; }
files=$(find "$WORK/out/manifests" -type f | wc -l)
hwm=$(kib VmHWM)
ready_anon=$(kib RssAnon); ready_file=$(kib RssFile)
sleep 5   # a few unchanged polls
rss=$(kib VmRSS)
anon=$(kib RssAnon); filed=$(kib RssFile)
hwm_after=$(kib VmHWM)
kill -TERM "$AGENT_PID"; wait "$AGENT_PID"; code=$?; AGENT_PID=""
printf 'objects applied:            %d (files in target)\n' "$files"
printf 'start -> ready (first apply): %.2f s\n' "$(echo "$end - $start" | bc)"
printf 'peak RSS through first apply: %.1f MiB (VmHWM; goal <= 20 MiB)\n' "$(echo "$hwm / 1024" | bc -l)"
printf 'idle RSS after 5 s of polls:  %.1f MiB (VmRSS; goal <= 12 MiB); VmHWM then %.1f MiB\n' "$(echo "$rss / 1024" | bc -l)" "$(echo "$hwm_after / 1024" | bc -l)"
AGENT=$AGENT bench/link-order.sh --check
printf '  at ready: RssAnon %d KiB, RssFile %d KiB; idle: RssAnon %d KiB, RssFile %d KiB\n' "$ready_anon" "$ready_file" "$anon" "$filed"
printf 'SIGTERM exit code:            %d\n' "$code"
printf 'fleet reports:                %s\n' "$(grep -o 'fleet reports [a-z]*[^"]*' "$WORK/agent.log" | head -1)"

# 4. An unsigned bundle with a 45 MiB incompressible layer at the channel tag, written as
#    an OCI layout by hand and copied in with skopeo (the attacker's write).
python3 - "$WORK/evil" <<'PY'
import gzip, hashlib, io, json, os, sys, tarfile
out = sys.argv[1]
blobs = os.path.join(out, "blobs", "sha256")
os.makedirs(blobs)
def put(b):
    d = hashlib.sha256(b).hexdigest()
    open(os.path.join(blobs, d), "wb").write(b)
    return "sha256:" + d
data = os.urandom(45 << 20)
path = "manifests/app/ConfigMap.core.blob.yaml"
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as t:
    info = tarfile.TarInfo(path); info.size = len(data); info.mode = 0o644
    t.addfile(info, io.BytesIO(data))
layer = gzip.compress(buf.getvalue(), compresslevel=0, mtime=0)
config = json.dumps({"schemaVersion": 1, "clusterType": "bench", "environment": "prod", "sequence": 2,
    "source": {"repository": "", "revision": ""}, "objects": [{"apiVersion": "v1", "kind": "ConfigMap",
    "namespace": "app", "name": "blob", "path": path, "sha256": hashlib.sha256(data).hexdigest()}]}).encode()
oci = "application/vnd.oci.image.manifest.v1+json"
manifest = json.dumps({"schemaVersion": 2, "mediaType": oci, "artifactType": "application/vnd.drover.bundle.v1",
    "config": {"mediaType": "application/vnd.drover.bundle.config.v1+json", "digest": put(config), "size": len(config)},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": put(layer), "size": len(layer)}]}).encode()
index = {"schemaVersion": 2, "manifests": [{"mediaType": oci, "digest": put(manifest), "size": len(manifest),
    "annotations": {"org.opencontainers.image.ref.name": "evil"}}]}
json.dump(index, open(os.path.join(out, "index.json"), "w"))
json.dump({"imageLayoutVersion": "1.0.0"}, open(os.path.join(out, "oci-layout"), "w"))
PY
skopeo copy --quiet --dest-tls-verify=false "oci:$WORK/evil:evil" "docker://$REG/fleet/evil:prod"
if /usr/bin/time -f %M -o "$WORK/evil.kib" "$AGENT" run --once --source "$REG/fleet/evil:prod" --plain-http \
  --trust-key "$WORK/keys/drover.pub" --expect-cluster-type bench --expect-environment prod \
  --target "dir:$WORK/evil-out" --state-dir "$WORK/evil-state" --listen "127.0.0.1:$(free_port)" 2>"$WORK/evil.log"; then
  echo "the unsigned bundle was accepted"; cat "$WORK/evil.log"; exit 1
fi
grep -q 'reason="unsigned"' "$WORK/evil.log" || { echo "not refused as unsigned:"; cat "$WORK/evil.log"; exit 1; }
printf 'peak RSS refusing an unsigned bundle with a 45 MiB layer: %.1f MiB (--once, /usr/bin/time %%M; goal < 20 MiB)\n' \
  "$(echo "$(tail -1 "$WORK/evil.kib") / 1024" | bc -l)"
