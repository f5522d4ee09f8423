#!/usr/bin/env bash
# Air-gap benchmark (issue 7 numbers), release mode: pushes 300 signed bundles (300
# cluster types) to a local registry, then times `drover export` of all 300 into one
# archive and `drover import` of it into a second registry (wall time, peak RSS), plus
# the peak RSS of importing one ~20 MiB bundle (memory bound: one blob at a time).
# Usage: bench/airgap.sh [N]   (N bundles, default 300). Stops its registries on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
N=${1:-300}
[[ -n ${SKIP_BUILD:-} ]] || cargo build --release -p drover-bundler --quiet   # SKIP_BUILD=1: use the existing binary
DROVER=${DROVER:-$PWD/target/release/drover}   # DROVER=PATH: measure another binary
WORK=$(mktemp -d)
source bench/lib.sh
cleanup() { stop_registries; rm -rf "$WORK"; }
trap cleanup EXIT
export DROVER_KEY_PASSWORD=bench

start_registry; SRC=$REG
REG_ACCESSLOG=1 start_registry; DST=$REG; DST_LOG=$REG_LOG
start_registry; DST2=$REG
"$DROVER" keygen --out-dir "$WORK/k" >/dev/null
echo "pushing $N signed bundles to $SRC"
REFS=()
for i in $(seq -w 1 "$N"); do
  d="$WORK/in/$i"; mkdir -p "$d"
  for j in 1 2 3 4 5; do
    printf 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%s, namespace: ns-%s}\ndata: {type: "%s", value: "%s"}\n' "$j" "$i" "$i" "$RANDOM" >"$d/cm-$j.yaml"
  done
  "$DROVER" push "$d" "$SRC/fleet/type-$i:prod" --plain-http --sequence 1 --environment prod --key "$WORK/k/drover.key" >/dev/null
  REFS+=("$SRC/fleet/type-$i:prod")
done

echo
/usr/bin/time -f "%e %M" -o "$WORK/t" "$DROVER" export "${REFS[@]}" --out "$WORK/all.tar" --plain-http >/dev/null
read -r es ek <"$WORK/t"
/usr/bin/time -f "%e %M" -o "$WORK/t" "$DROVER" -o json import "$WORK/all.tar" --to "$DST/mirror" --trust-key "$WORK/k/drover.pub" --plain-http >"$WORK/imp.json"
read -r is ik <"$WORK/t"
ireq=$(count_requests "$DST_LOG" 0); off=$(stat -c %s "$DST_LOG")
/usr/bin/time -f "%e %M" -o "$WORK/t" "$DROVER" -o json import "$WORK/all.tar" --to "$DST/mirror" --trust-key "$WORK/k/drover.pub" --plain-http >/dev/null
read -r i2s i2k <"$WORK/t"
i2req=$(count_requests "$DST_LOG" "$off")
echo "export $N bundles:            ${es} s, peak RSS $((ek / 1024)) MiB, archive $(( $(stat -c %s "$WORK/all.tar") / 1024 )) KiB"
echo "import $N bundles (verified): ${is} s, peak RSS $((ik / 1024)) MiB, $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["manifests"]))' "$WORK/imp.json") manifests; $ireq"
echo "import again (no-op):         ${i2s} s, peak RSS $((i2k / 1024)) MiB; $i2req"
if [[ ${PEER:-1} != 0 ]]; then   # PEER=0: skip the (slow) skopeo side
  # The peer: skopeo moving the same bundles and signatures (every tag of the N
  # repositories) from the source registry to a fresh one in one `skopeo sync`.
  python3 - "$SRC" "$N" >"$WORK/sync.yaml" <<'PY2'
import json, sys, urllib.request
reg, n = sys.argv[1], int(sys.argv[2])
print(f"{reg}:\n  tls-verify: false\n  images:")
for i in range(1, n + 1):
    repo = f"fleet/type-{i:0{len(str(n))}d}"
    tags = json.load(urllib.request.urlopen(f"http://{reg}/v2/{repo}/tags/list"))["tags"]
    print(f"    {repo}: [{', '.join(json.dumps(x) for x in sorted(tags))}]")
PY2
  start_registry
  timeout 900 /usr/bin/time -f "%e %M" -o "$WORK/t" skopeo sync --src yaml --dest docker --dest-tls-verify=false "$WORK/sync.yaml" "$REG/mirror" >/dev/null 2>"$WORK/skopeo.err" || { cat "$WORK/skopeo.err"; exit 1; }
  read -r ss sk <"$WORK/t"
  echo "peer: skopeo sync of the same $N repositories (bundle + signature each): ${ss} s, peak RSS $((sk / 1024)) MiB"
fi

# One ~20 MiB bundle: import peak RSS stays near one blob, not the archive size.
mkdir -p "$WORK/big"
python3 - "$WORK/big" <<'PY'
import base64, os, random, sys
random.seed(2)
for i in range(54):
    with open(os.path.join(sys.argv[1], f"cm-{i:02d}.yaml"), "w") as fh:
        fh.write(f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: blob-{i}, namespace: data}}\ndata:\n  payload: {base64.b64encode(random.randbytes(384 * 1024)).decode()}\n")
PY
"$DROVER" push "$WORK/big" "$SRC/fleet/big:prod" --plain-http --sequence 1 --key "$WORK/k/drover.key" >/dev/null
"$DROVER" export "$SRC/fleet/big:prod" --out "$WORK/big.tar" --plain-http >/dev/null
/usr/bin/time -f "%e %M" -o "$WORK/t" "$DROVER" import "$WORK/big.tar" --to "$DST2/mirror" --trust-key "$WORK/k/drover.pub" --plain-http >/dev/null
read -r bs bk <"$WORK/t"
echo "import one $(( $(stat -c %s "$WORK/big.tar") / 1048576 )) MiB bundle: ${bs} s, peak RSS $((bk / 1024)) MiB"
