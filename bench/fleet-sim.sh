#!/usr/bin/env bash
# Fleet simulation (issue 12, docs/fleet.md "Numbers"), release mode, not in CI. Bounded
# (seeding, then poll + window per phase, then the reads: about 9 minutes at the
# defaults); everything stops by itself.
# Starts its own docker-registry on a free loopback port, pushes a signed bundle to a
# channel, then runs agent/examples/fleet_sim.rs: N simulated agents in one process using
# the agent's real poll (one HEAD of the channel) and its real Reporter (report built,
# change/heartbeat decided, pushed). Every agent first writes its report; then each phase
# (default 1,000 / 5,000 / 10,000 agents, HEAD every 60 s, heartbeat every 5 min) runs one
# poll interval to settle and measures the HEAD latency the agents see for WINDOW. Last,
# `drover fleet enroll --all-pending` approves every simulated cluster's report key (each
# agent signs its reports with a key of its own) and the release `drover fleet status`
# reads and verifies every report against that roster. Prints:
#   1. p50 / p99 / max HEAD latency per phase (goal: p99 < 50 ms at 10,000 agents), with
#      the registry's and the agents' CPU in each window
#   2. the time of `drover fleet enroll` and of `drover fleet status` over all signed
#      reports (goal: < 10 s at 10,000), the CPU drover and the registry spent, and the
#      registry's floor: the same GETs by curl; then the same with declared membership:
#      `fleet enroll --fleet --all-pending` writing a Fleet file of 10,000 clusters (its
#      size), and `fleet status --fleet`
#   3. the registry's storage per report write (what garbage collection has to remove)
# The machine's load average is printed before and after: on a shared machine it is part
# of the numbers. Needs about 1 GB in TMPDIR (removed at the end).
# Usage: bench/fleet-sim.sh            PHASES=1000,5000,10000 WINDOW=60s POLL=60s REPORT_INTERVAL=5m
#        (the declared-membership numbers alone: PHASES=10000 WINDOW=10s POLL=10s, ~5 minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
PHASES=${PHASES:-1000,5000,10000}
WINDOW=${WINDOW:-60s}
POLL=${POLL:-60s}
REPORT_INTERVAL=${REPORT_INTERVAL:-5m}
[[ -n ${SKIP_BUILD:-} ]] || cargo build --release -p drover-bundler --bin drover -p drover-agent --example fleet_sim --quiet
# DROVER= and SIM= (with SKIP_BUILD=1) run other builds, e.g. a debug one to check the script.
DROVER=${DROVER:-$PWD/target/release/drover}
SIM=${SIM:-$PWD/target/release/examples/fleet_sim}
WORK=$(mktemp -d)
source bench/lib.sh
cleanup() {
  stop_registries
  rm -rf "$WORK"
}
trap cleanup EXIT
# 10,000 agents share 100 connection pools; the registry holds a socket per connection.
ulimit -n "$(ulimit -Hn)"

start_registry
STORAGE="$WORK/reg-${REG##*:}/storage"
REF="$REG/fleet/bench:prod"
REPORTS="$REG/fleet/drover-reports"

# The channel: a small signed bundle (what the agents HEAD).
mkdir -p "$WORK/in"
for i in 1 2 3; do
  printf 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg-%s, namespace: bench}\ndata: {index: "%s"}\n' "$i" "$i" >"$WORK/in/cfg-$i.yaml"
done
DROVER_KEY_PASSWORD= "$DROVER" keygen --out-dir "$WORK/keys" >/dev/null 2>&1
DROVER_KEY_PASSWORD= "$DROVER" push "$WORK/in" "$REF" --plain-http --sequence 1 --cluster-type bench \
  --environment prod --key "$WORK/keys/drover.key" >/dev/null 2>&1

load() { printf '%s (1/5/15 min) on %s cores' "$(cut -d' ' -f1-3 /proc/loadavg)" "$(nproc)"; }
kib() { du -sk "$STORAGE" | cut -f1; }
echo "load average before: $(load)"
# Bounded twice: the simulation stops after its last window; timeout is the backstop.
timeout 1800 "$SIM" --source "$REF" --reports-to "$REPORTS" --phases "$PHASES" --window "$WINDOW" \
  --poll "$POLL" --report-interval "$REPORT_INTERVAL" --watch-pid "$REG_PID" >"$WORK/sim.json"
echo "load average after the phases: $(load)"

jq -r '"seeded \(.seeded) reports (one per agent) in \(.seedSecs * 10 | round / 10) s"' "$WORK/sim.json"
# CPU in cores over the window: the registry's, and the simulated agents' (one process).
printf '%8s %8s %6s %9s %9s %9s %8s %9s %9s\n' agents HEADs errors "p50 ms" "p99 ms" "max ms" reports "reg CPU" "sim CPU"
jq -r '.phases[] | [.agents, .heads, .headErrors, .p50Ms, .p99Ms, .maxMs, .reports, .registryCpuCores, .simCpuCores] | @tsv' "$WORK/sim.json" |
  while IFS=$'\t' read -r a h e p50 p99 max r rc sc; do
    printf '%8d %8d %6d %9.2f %9.2f %9.2f %8d %9.2f %9.2f\n' "$a" "$h" "$e" "$p50" "$p99" "$max" "$r" "$rc" "$sc"
  done
# 3. Every report write leaves a config blob and a manifest blob behind (untagged after the
#    next write): count the blobs and their bytes.
blobs=$(find "$STORAGE/docker/registry/v2/blobs" -name data | wc -l)
bytes=$(find "$STORAGE/docker/registry/v2/blobs" -name data -printf '%s\n' | awk '{s+=$1} END {print s}')
printf 'registry storage: %d blobs, %.1f MiB of data (%.0f bytes per report write: config + manifest), %d MiB on disk\n' \
  "$blobs" "$(echo "$bytes / 1048576" | bc -l)" "$(echo "$bytes * 2 / $blobs" | bc -l)" "$(( $(kib) / 1024 ))"

# 2. fleet enroll approves every cluster's report key (one signed roster), then fleet
#    status reads every report and checks its signature against it (release build,
#    default 32 reads at once), twice; with the CPU drover and the registry spent on it.
reg_cpu() { awk '{print $14 + $15}' "/proc/$REG_PID/stat"; }
before=$(reg_cpu)
/usr/bin/time -f '%e %U %S %M' -o "$WORK/enroll.time" env DROVER_KEY_PASSWORD= "$DROVER" -o json fleet enroll --registry "$REG/fleet" \
  --key "$WORK/keys/drover.key" --all-pending --plain-http >"$WORK/enroll.json"
read -r secs user sys rss <"$WORK/enroll.time"
printf 'drover fleet enroll --all-pending: %d clusters in %.2f s; drover CPU %.2f s, peak RSS %d KiB; registry CPU %.2f s\n' \
  "$(jq .enrolled "$WORK/enroll.json")" "$secs" "$(echo "$user + $sys" | bc)" "$rss" "$(echo "($(reg_cpu) - $before) / 100" | bc -l)"
for output in json table; do
  before=$(reg_cpu)
  /usr/bin/time -f '%e %U %S %M' -o "$WORK/status.time" "$DROVER" -o "$output" fleet status --registry "$REG/fleet" \
    --trust-key "$WORK/keys/drover.pub" --plain-http >"$WORK/status.$output"
  read -r secs user sys rss <"$WORK/status.time"
  printf 'drover fleet status -o %s: %.2f s (goal < 10 s at 10,000); drover CPU %.2f s, peak RSS %d KiB; registry CPU %.2f s\n' \
    "$output" "$secs" "$(echo "$user + $sys" | bc)" "$rss" "$(echo "($(reg_cpu) - $before) / 100" | bc -l)"
done
echo "clusters in the status: $(jq '.clusters | length' "$WORK/status.json"), of them counted (signed, enrolled): $(jq '[.clusters[] | select(.untrusted == null)] | length' "$WORK/status.json")"
# 2b. Declared membership (issue 30): the same clusters declared in a Fleet file, written by
#     `fleet enroll --fleet --all-pending` from their signed reports (no key); the file's
#     size; then `fleet status --fleet` (every report judged against the file; with
#     --trust-key the channel's bundle is read too, to classify against it).
mkdir -p "$WORK/platform/cluster-types"
printf 'apiVersion: drover.dev/v1\nkind: ClusterType\nmetadata: {name: bench}\n' >"$WORK/platform/cluster-types/bench.yaml"
printf '# The bench fleet.\napiVersion: drover.dev/v1\nkind: Fleet\nspec:\n  environments: [prod]\n  clusters: []\n' >"$WORK/platform/fleet.yaml"
before=$(reg_cpu)
/usr/bin/time -f '%e %U %S %M' -o "$WORK/declare.time" "$DROVER" -o json fleet enroll --fleet "$WORK/platform/fleet.yaml" --registry "$REG/fleet" \
  --all-pending --plain-http >"$WORK/declare.json"
read -r secs user sys rss <"$WORK/declare.time"
printf 'drover fleet enroll --fleet --all-pending: %d clusters declared in %.2f s; drover CPU %.2f s, peak RSS %d KiB; registry CPU %.2f s\n' \
  "$(jq .enrolled "$WORK/declare.json")" "$secs" "$(echo "$user + $sys" | bc)" "$rss" "$(echo "($(reg_cpu) - $before) / 100" | bc -l)"
printf 'the Fleet file for %d clusters: %d bytes (%d lines)\n' "$(jq .enrolled "$WORK/declare.json")" "$(stat -c %s "$WORK/platform/fleet.yaml")" "$(wc -l <"$WORK/platform/fleet.yaml")"
for output in json table; do
  before=$(reg_cpu)
  /usr/bin/time -f '%e %U %S %M' -o "$WORK/declared.time" "$DROVER" -o "$output" fleet status --registry "$REG/fleet" \
    --fleet "$WORK/platform/fleet.yaml" --trust-key "$WORK/keys/drover.pub" --plain-http >"$WORK/declared.$output"
  read -r secs user sys rss <"$WORK/declared.time"
  printf 'drover fleet status --fleet -o %s: %.2f s (was 11.5 s with the roster); drover CPU %.2f s, peak RSS %d KiB; registry CPU %.2f s\n' \
    "$output" "$secs" "$(echo "$user + $sys" | bc)" "$rss" "$(echo "($(reg_cpu) - $before) / 100" | bc -l)"
done
echo "declared clusters in the status: $(jq '.clusters | length' "$WORK/declared.json"), of them ready: $(jq '.summary[0].ready' "$WORK/declared.json")"
# The registry's floor: the same manifest GETs (one per report, 32 at once, keep-alive)
# by curl, the lightest client at hand. What drover adds is the difference.
jq -r --arg r "http://$REG/v2/fleet/drover-reports/manifests/" '.clusters[] | "url = \"\($r)\(.clusterType).\(.clusterName)\"\noutput = \"/dev/null\""' \
  "$WORK/status.json" >"$WORK/urls"
before=$(reg_cpu)
/usr/bin/time -f '%e %U %S' -o "$WORK/curl.time" curl -sS --no-progress-meter --fail --parallel --parallel-max 32 \
  -H 'Accept: application/vnd.oci.image.manifest.v1+json' -K "$WORK/urls"
read -r secs user sys <"$WORK/curl.time"
printf 'curl, the same %d manifest GETs: %.2f s; curl CPU %.2f s; registry CPU %.2f s\n' "$(grep -c '^url' "$WORK/urls")" \
  "$secs" "$(echo "$user + $sys" | bc)" "$(echo "($(reg_cpu) - $before) / 100" | bc -l)"
echo "load average at the end: $(load)"
