#!/usr/bin/env bash
# Bench: apply a 1,000-object bundle to the FAKE API server with drover-agent
# (--apply-concurrency 8, the default, vs 1) and with `kubectl apply --server-side`,
# plus the agent's peak RSS. Each run starts a fresh fake-apiserver (so every object is
# created), and a second agent run re-applies the same bundle (a resync: everything
# unchanged). Every pass prints the API requests it made (the fake's request counts): a
# resync of an unchanged cluster makes no write and one LIST per kind and namespace
# (plus pages of 500), where `kubectl apply --server-side` PATCHes every object. A
# long-running agent (c=8) on a fresh fake then gives the peak RSS through its first apply
# and the idle RSS after 5 s of unchanged polls (VmHWM, VmRSS).
#
#   tests/bench/kube-apply.sh [N_OBJECTS] [PROFILE] [PATCH_LATENCY_MS]   # defaults: 1000 release 0
#   SKIP_KUBECTL=1 tests/bench/kube-apply.sh 10000   # the agent's passes only
#   SMAPS=/tmp/smaps SKIP_KUBECTL=1 tests/bench/kube-apply.sh   # also keeps the idle agent's smaps
#
# PATCH_LATENCY_MS > 0 makes the fake answer every PATCH that much later (its delay hook),
# standing in for a real API server's etcd write latency; kubectl gets the same delay.
# Needs: docker-registry, kubectl, GNU time; builds nothing (run
# `cargo build --release --workspace --bins`, the feature set tests/run.sh builds, or the
# agent alone as it ships, `cargo build --release -p drover-agent`: agent/build.rs's link
# order applies to both; RUSTFLAGS unset, so .cargo/config.toml's v0 symbol names hold).
set -euo pipefail
N=${1:-1000}
PROFILE=${2:-release}
LATENCY=${3:-0}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$ROOT/target/$PROFILE
W=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$W"' EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now() { date +%s.%N; }

# Registry.
RP=$(port)
cat > "$W/reg.yml" <<YML
version: 0.1
storage: {filesystem: {rootdirectory: $W/reg}}
http: {addr: 127.0.0.1:$RP}
YML
docker-registry serve "$W/reg.yml" >"$W/reg.log" 2>&1 &
for _ in $(seq 50); do curl -fs "http://127.0.0.1:$RP/v2/" >/dev/null 2>&1 && break; sleep 0.1; done

# Input: one Namespace and N-1 ConfigMaps.
mkdir -p "$W/in"
python3 - "$W/in" "$N" <<'PY'
import sys
d, n = sys.argv[1], int(sys.argv[2])
with open(f"{d}/all.yaml", "w") as f:
    f.write("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: bench\n")
    for i in range(n - 1):
        f.write(f"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i:04d}\n  namespace: bench\n  labels:\n    app: bench\ndata:\n  index: \"{i}\"\n  payload: \"{'x' * 200}\"\n")
PY
DROVER_KEY_PASSWORD= "$BIN/drover" keygen --out-dir "$W/keys" >/dev/null
REF=127.0.0.1:$RP/bench/edge:prod
DROVER_KEY_PASSWORD= "$BIN/drover" push "$W/in" "$REF" --plain-http --key "$W/keys/drover.key" --sequence 1 >/dev/null

counts_reset() { curl -fs -X DELETE "$URL/fake/request-counts" >/dev/null; }
counts() { # one line: the requests since counts_reset, per verb, writes first
  curl -fs "$URL/fake/request-counts" | python3 -c '
import json, sys
by = {}
for r in json.load(sys.stdin):
    by[r["verb"]] = by.get(r["verb"], 0) + r["count"]
writes = sum(by.get(v, 0) for v in ("CREATE", "UPDATE", "PATCH", "DELETE", "DELETECOLLECTION"))
print("writes %d (%s)" % (writes, ", ".join("%s %d" % kv for kv in sorted(by.items()))))'
}

fake() { # starts a fresh fake API server, sets KC and URL
  local out=$W/fake-$1
  "$BIN/fake-apiserver" --kubeconfig-out "$out.kc" >"$out.out" 2>"$out.err" &
  for _ in $(seq 100); do grep -q ready "$out.out" 2>/dev/null && break; sleep 0.05; done
  KC=$out.kc
  URL=$(grep -o 'server: .*' "$KC" | cut -d' ' -f2)
  # The agent's namespace, where its state record lives (deploy/kubernetes creates it).
  curl -fs -X POST "$URL/api/v1/namespaces" -H 'Content-Type: application/json' \
    -d '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"drover-system"}}' >/dev/null
  if ((LATENCY > 0)); then
    curl -fs -X POST "$URL/fake/errors" -H 'Content-Type: application/json' \
      -d "{\"method\":\"PATCH\",\"path\":\"*\",\"code\":0,\"delayMs\":$LATENCY,\"times\":1000000}" >/dev/null
  fi
}

agent() { # label concurrency
  local label=$1 c=$2 state=$W/state-$1
  fake "$label"
  for pass in create resync; do
    local t0 t1
    counts_reset
    t0=$(now)
    KUBECONFIG=$KC /usr/bin/time -f "%M %U %S" -o "$W/rss" "$BIN/drover-agent" run --once --target kube --source "$REF" --plain-http \
      --trust-key "$W/keys/drover.pub" --state-dir "$state" --listen 127.0.0.1:0 --resync 0s --apply-concurrency "$c" --log-format json \
      2>"$W/agent-$label-$pass.log"
    t1=$(now)
    local apply_ms
    apply_ms=$(grep -o 'applied order group.*' "$W/agent-$label-$pass.log" | grep -o '"ms":[0-9]*' | cut -d: -f2 | paste -sd+ | bc)
    local rss user sys cpu
    read -r rss user sys <"$W/rss"
    cpu=$(echo "$user + $sys" | bc)
    printf '%-28s %-7s total %5.2f s  apply stage %5.2f s  agent CPU %5.2f s  peak RSS %5.1f MiB  %s\n' "drover-agent c=$c" "$pass" \
      "$(echo "$t1 - $t0" | bc)" "$(echo "scale=2; $apply_ms / 1000" | bc)" "$cpu" "$(echo "scale=1; $rss / 1024" | bc)" "$(counts)"
  done
}

idle() { # a long-running agent (c=8) on a fresh fake: peak RSS through the first apply, idle RSS after polls
  fake idle
  local listen=127.0.0.1:$(port) state=$W/state-idle
  KUBECONFIG=$KC "$BIN/drover-agent" run --target kube --source "$REF" --plain-http --trust-key "$W/keys/drover.pub" \
    --state-dir "$state" --listen "$listen" --interval 1s --log-format json 2>"$W/agent-idle.log" &
  local pid=$!
  for _ in $(seq 1200); do curl -fs "http://$listen/readyz" >/dev/null 2>&1 && break; sleep 0.05; done
  curl -fs "http://$listen/readyz" >/dev/null || { echo "the long-running agent never became ready"; tail -5 "$W/agent-idle.log"; exit 1; }
  local hwm rss anon file
  kib() { awk -v k="$1" '$1==k":" {print $2}' "/proc/$pid/status"; }
  hwm=$(kib VmHWM)
  sleep 5 # some unchanged polls
  rss=$(kib VmRSS) anon=$(kib RssAnon) file=$(kib RssFile)
  [[ -z ${SMAPS:-} ]] || cp "/proc/$pid/smaps" "$SMAPS"   # SMAPS=FILE: where the idle RSS lies
  printf '%-28s %-7s peak RSS through the first apply %5.1f MiB  idle RSS after 5 s of polls %5.1f MiB (anon %d KiB, file %d KiB)\n' \
    "drover-agent c=8 (running)" idle "$(echo "scale=1; $hwm / 1024" | bc)" "$(echo "scale=1; $rss / 1024" | bc)" "$anon" "$file"
  kill -TERM "$pid"; wait "$pid" || true
}

echo "objects: $N (1 Namespace + $((N - 1)) ConfigMaps), profile: $PROFILE, PATCH latency: ${LATENCY} ms, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
agent c8 8
agent c1 1
idle
AGENT=$BIN/drover-agent "$ROOT/bench/link-order.sh" --check
[[ -z ${SKIP_KUBECTL:-} ]] || exit 0
fake kubectl
for pass in create reapply; do
  counts_reset
  t0=$(now)
  kubectl --kubeconfig "$KC" --cache-dir "$W/kcache" apply --server-side --field-manager drover-bench -f "$W/in/all.yaml" >/dev/null
  t1=$(now)
  printf '%-28s %-7s total %5.2f s  %s\n' "kubectl apply --server-side" "$pass" "$(echo "$t1 - $t0" | bc)" "$(counts)"
done
