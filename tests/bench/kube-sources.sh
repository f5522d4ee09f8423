#!/usr/bin/env bash
# Bench: the idle memory of one agent with many sources (docs/agent.md, "Several
# sources"). N sources (default 20), each its own channel, signing key and namespace
# (allowedNamespaces) with M objects (default 10: a Namespace and M-1 ConfigMaps), in one
# long-running `drover-agent run --config` against the FAKE API server, polling every
# second; beside it, in the same run, the same agent with one such source. For each: the
# peak RSS through the first applies (VmHWM) and the idle RSS after 5 s of unchanged polls
# once every source is applied (VmRSS, RssAnon, RssFile).
#
#   tests/bench/kube-sources.sh [N_SOURCES] [M_OBJECTS] [PROFILE]   # defaults: 20 10 release
#
# Needs: docker-registry, GNU time; builds nothing (run
# `cargo build --release --workspace --bins`, or the agent alone as it ships,
# `cargo build --release -p drover-agent`: agent/build.rs's link order applies to both). Bounded: each agent is stopped after at most ~2 minutes.
set -euo pipefail
N=${1:-20}
M=${2:-10}
PROFILE=${3:-release}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$ROOT/target/$PROFILE
W=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$W"' EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Registry.
RP=$(port)
cat > "$W/reg.yml" <<YML
version: 0.1
storage: {filesystem: {rootdirectory: $W/reg}}
http: {addr: 127.0.0.1:$RP}
YML
docker-registry serve "$W/reg.yml" >"$W/reg.log" 2>&1 &
for _ in $(seq 50); do curl -fs "http://127.0.0.1:$RP/v2/" >/dev/null 2>&1 && break; sleep 0.1; done

# One channel, key and namespace per source.
for i in $(seq -w 1 "$N"); do
  mkdir -p "$W/in-$i"
  python3 - "$W/in-$i" "$M" "team-$i" <<'PY'
import sys
d, m, ns = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with open(f"{d}/all.yaml", "w") as f:
    f.write(f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n")
    for j in range(m - 1):
        f.write(f"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{j:03d}\n  namespace: {ns}\ndata:\n  index: \"{j}\"\n  payload: \"{'x' * 200}\"\n")
PY
  DROVER_KEY_PASSWORD= "$BIN/drover" keygen --out-dir "$W/keys-$i" >/dev/null
  DROVER_KEY_PASSWORD= "$BIN/drover" push "$W/in-$i" "127.0.0.1:$RP/fleet/team-$i:prod" --plain-http --key "$W/keys-$i/drover.key" --sequence 1 >/dev/null
done

config() { # file n: the agent's config with the first n sources
  {
    echo "plainHttp: true"
    echo "interval: 1s"
    echo "sources:"
    for i in $(seq -w 1 "$N" | head -n "$2"); do
      echo "- name: team-$i"
      echo "  source: 127.0.0.1:$RP/fleet/team-$i:prod"
      echo "  trustKeys: [$W/keys-$i/drover.pub]"
      echo "  allowedNamespaces: [team-$i]"
    done
  } >"$1"
}

idle() { # label n: a long-running agent with n sources on a fresh fake API server
  local label=$1 n=$2 out=$W/fake-$1
  "$BIN/fake-apiserver" --kubeconfig-out "$out.kc" >"$out.out" 2>"$out.err" &
  local fake=$!
  for _ in $(seq 100); do grep -q ready "$out.out" 2>/dev/null && break; sleep 0.05; done
  local url
  url=$(grep -o 'server: .*' "$out.kc" | cut -d' ' -f2)
  curl -fs -X POST "$url/api/v1/namespaces" -H 'Content-Type: application/json' \
    -d '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"drover-system"}}' >/dev/null
  config "$W/agent-$label.yaml" "$n"
  local listen=127.0.0.1:$(port)
  KUBECONFIG=$out.kc "$BIN/drover-agent" run --target kube --config "$W/agent-$label.yaml" --state-dir "$W/state-$label" \
    --listen "$listen" --log-format json 2>"$W/agent-$label.log" &
  local pid=$!
  for _ in $(seq 1200); do curl -fs "http://$listen/readyz" >/dev/null 2>&1 && break; sleep 0.05; done
  curl -fs "http://$listen/readyz" >/dev/null || { echo "$label: the agent never became ready"; curl -s "http://$listen/readyz"; tail -5 "$W/agent-$label.log"; exit 1; }
  local applied
  applied=$(curl -fs "http://$listen/status" | python3 -c 'import json,sys; print(sum(1 for s in json.load(sys.stdin)["sources"] if s["appliedDigest"]))')
  kib() { awk -v k="$1" '$1==k":" {print $2}' "/proc/$pid/status"; }
  local hwm rss anon file
  hwm=$(kib VmHWM)
  sleep 5 # unchanged polls of every source
  rss=$(kib VmRSS) anon=$(kib RssAnon) file=$(kib RssFile)
  printf '%-22s %2d source(s) applied  peak RSS through the first applies %5.1f MiB  idle RSS after 5 s of polls %5.1f MiB (anon %d KiB, file %d KiB)\n' \
    "$label" "$applied" "$(echo "scale=1; $hwm / 1024" | bc)" "$(echo "scale=1; $rss / 1024" | bc)" "$anon" "$file"
  kill -TERM "$pid"; wait "$pid" || true
  kill "$fake"; wait "$fake" 2>/dev/null || true
}

echo "sources: $N x $M objects (1 Namespace + $((M - 1)) ConfigMaps each), profile: $PROFILE, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
idle "one source" 1
idle "$N sources" "$N"
