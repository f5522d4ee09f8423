#!/usr/bin/env bash
# Bundle benchmarks (issue 2), release mode. Generates its own input, starts its own
# registries on free loopback ports, stops them, and prints a summary:
#   1. `drover build` of 5,000 generated objects: wall time and peak RSS (goal < 2 s, < 100 MiB)
#   2. `drover push DIR REF` of a ~20 MiB bundle vs `skopeo copy oci:LAYOUT:TAG docker://...`
#      of the same bundle to the same kind of registry: ratio (goal <= 1.0)
# Usage: bench/bundle.sh [RUNS]   (RUNS per measurement, default 3; the median is reported)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
[[ -n ${SKIP_BUILD:-} ]] || cargo build --release -p drover-bundler --quiet   # SKIP_BUILD=1: use the existing binary
DROVER=${DROVER:-$PWD/target/release/drover}   # DROVER=PATH: measure another binary
WORK=$(mktemp -d)
source bench/lib.sh
cleanup() { stop_registries; rm -rf "$WORK"; }
trap cleanup EXIT

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# Each measurement gets a fresh registry (start_registry: new port, new storage), so no
# run benefits from blobs or caches of another.

echo "generating input in $WORK"
python3 - "$WORK" <<'PY'
import base64, os, random, sys
work = sys.argv[1]
random.seed(1)
# 1) 5,000 objects: 50 namespaces, each with 33 Deployments, 33 Services, 33 ConfigMaps (+1 Namespace) in 10 files
root = os.path.join(work, "objects")
n = 0
for ns in range(50):
    d = os.path.join(root, f"team-{ns:02d}")
    os.makedirs(d, exist_ok=True)
    docs = [f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-{ns:02d}\n  labels: {{team: t{ns}}}\n"]
    for i in range(33):
        docs.append(f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-{i}
  namespace: team-{ns:02d}
  labels: {{app: app-{i}, tier: web}}
spec:
  replicas: {1 + i % 3}
  selector: {{matchLabels: {{app: app-{i}}}}}
  template:
    metadata: {{labels: {{app: app-{i}}}}}
    spec:
      containers:
      - name: main
        image: registry.example.com/team-{ns}/app-{i}:1.{i}.0
        ports: [{{containerPort: 8080, name: http}}]
        env:
        - {{name: MODE, value: "on"}}
        - {{name: LEVEL, value: "{i}"}}
        resources: {{requests: {{cpu: 100m, memory: 128Mi}}, limits: {{memory: 256Mi}}}}
        readinessProbe: {{httpGet: {{path: /healthz, port: http}}, periodSeconds: 10}}
""")
        docs.append(f"apiVersion: v1\nkind: Service\nmetadata: {{name: app-{i}, namespace: team-{ns:02d}}}\nspec:\n  selector: {{app: app-{i}}}\n  ports:\n  - {{port: 80, targetPort: http}}\n")
        docs.append(f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: app-{i}, namespace: team-{ns:02d}}}\ndata:\n  config.yaml: |\n    level: {i}\n    feature: {i % 2 == 0}\n")
    n += len(docs)
    for f in range(10):
        with open(os.path.join(d, f"part-{f}.yaml"), "w") as fh:
            fh.write("---\n".join(docs[f::10]))
assert n == 50 * 100, n
# 2) a ~20 MiB (compressed) bundle: 54 ConfigMaps of 512 KiB random base64 each
big = os.path.join(work, "big")
os.makedirs(big)
for i in range(54):
    data = base64.b64encode(random.randbytes(384 * 1024)).decode()
    with open(os.path.join(big, f"cm-{i:02d}.yaml"), "w") as fh:
        fh.write(f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: blob-{i}, namespace: data}}\ndata:\n  payload: {data}\n")
print(f"{n} objects; big input {sum(os.path.getsize(os.path.join(big, f)) for f in os.listdir(big)) / 2**20:.1f} MiB")
PY

echo
echo "== 1. drover build of 5,000 objects (release, $RUNS runs)"
for r in $(seq "$RUNS"); do
  rm -rf "$WORK/l5k"
  /usr/bin/time -f "%e %M" -o "$WORK/t" "$DROVER" -o json build "$WORK/objects" --out "oci:$WORK/l5k:t" --sequence 1 >"$WORK/b.json"
  read -r secs kib <"$WORK/t"
  echo "run $r: ${secs} s, peak RSS $((kib / 1024)) MiB, $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["objects"])' "$WORK/b.json") objects"
  echo "$secs" >>"$WORK/build.s"; echo "$kib" >>"$WORK/build.k"
done
BUILD_S=$(median <"$WORK/build.s"); BUILD_K=$(median <"$WORK/build.k")

echo
echo "== 2. push of a ~20 MiB bundle: drover push DIR vs skopeo copy oci:LAYOUT (fresh registry each run)"
"$DROVER" -o json build "$WORK/big" --out "oci:$WORK/lbig:t" --sequence 1 >"$WORK/big.json"
LAYER=$(python3 - "$WORK/lbig" <<'PY'
import json, os, sys
lay = sys.argv[1]
idx = json.load(open(os.path.join(lay, "index.json")))
m = json.load(open(os.path.join(lay, "blobs/sha256", idx["manifests"][0]["digest"].split(":")[1])))
print(m["layers"][0]["size"])
PY
)
echo "bundle content layer: $((LAYER / 1024 / 1024)) MiB ($LAYER bytes)"
for r in $(seq "$RUNS"); do
  start_registry
  DROVER_LOG=drover_bundler=debug NO_COLOR=1 /usr/bin/time -f "%e %M" -o "$WORK/t" "$DROVER" push "$WORK/big" "$REG/bench/big:t" --plain-http --sequence 1 >/dev/null 2>"$WORK/push.log" \
    || { echo "drover push failed:"; grep -v DEBUG "$WORK/push.log" | tail -5; exit 1; }
  read -r secs kib <"$WORK/t"; echo "$secs" >>"$WORK/push.s"
  xfer=$(sed 's/\x1b\[[0-9;]*m//g' "$WORK/push.log" | sed -n 's/.*push_ms=\([0-9]*\).*/\1/p' | tail -1)
  echo "$xfer" | awk '{print $1/1000}' >>"$WORK/xfer.s"
  stop_registry
  start_registry
  /usr/bin/time -f "%e %M" -o "$WORK/t" skopeo copy --quiet --dest-tls-verify=false "oci:$WORK/lbig:t" "docker://$REG/bench/big:t"
  read -r ssecs skib <"$WORK/t"; echo "$ssecs" >>"$WORK/skopeo.s"
  stop_registry
  echo "run $r: drover push ${secs} s (peak RSS $((kib / 1024)) MiB; of which ${xfer} ms in the channel publish: packing (gzip) + transfer; the rest is reading the YAML); skopeo copy ${ssecs} s"
done
PUSH_S=$(median <"$WORK/push.s"); SKOPEO_S=$(median <"$WORK/skopeo.s"); XFER_S=$(median <"$WORK/xfer.s")

echo
echo "== summary (medians of $RUNS runs)"
echo "build 5,000 objects:   ${BUILD_S} s, peak RSS $((BUILD_K / 1024)) MiB   (goal < 2 s, < 100 MiB)"
echo "push ~20 MiB bundle:   drover push DIR ${PUSH_S} s (build + transfer; goal <= 1.0 s) vs skopeo copy ${SKOPEO_S} s: ratio $(python3 -c "print(round($PUSH_S / $SKOPEO_S, 2))")"
echo "                       pack + transfer part of drover push ${XFER_S} s vs skopeo copy ${SKOPEO_S} s: ratio $(python3 -c "print(round($XFER_S / $SKOPEO_S, 2))")   (goal <= 1.0)"
