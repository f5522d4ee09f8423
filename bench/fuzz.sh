#!/usr/bin/env bash
# Fuzzing (issue 14): runs every cargo-fuzz target in fuzz/ for SECONDS, one after the
# other, and prints executions, time, coverage and result per target. Exits 1 when a
# target found a crash, a hang (an input over 10 s) or an out-of-memory (over 2 GiB, or
# one allocation over 2 GiB); the input that did it is in fuzz/artifacts/TARGET/ and the
# log in fuzz/artifacts/TARGET.log. Needs the nightly toolchain and cargo-fuzz
# (`rustup toolchain install nightly`, `cargo install cargo-fuzz`).
#
# Usage: bench/fuzz.sh SECONDS [TARGET...]   (default: every target, `cargo fuzz list`)
#   SKIP_BUILD=1        use the targets already built (`cargo +nightly fuzz build -a`)
#   FUZZ_ARGS="..."     more libFuzzer flags, e.g. FUZZ_ARGS="-max_len=65536"
#
# Each target reads the committed seeds (fuzz/seeds/TARGET) and its working corpus
# (fuzz/corpus/TARGET, not committed), and adds what it finds to the working corpus, so a
# second run starts where the first one stopped. Each run is bounded: libFuzzer stops
# itself after SECONDS, and `timeout` kills it 5 minutes later if it does not.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: bench/fuzz.sh SECONDS [TARGET...]" >&2; exit 2; }
[[ $# -ge 1 && $1 =~ ^[1-9][0-9]*$ ]] || usage
SECS=$1
shift
cargo +nightly fuzz --help >/dev/null 2>&1 || { echo "cargo-fuzz on the nightly toolchain is missing: rustup toolchain install nightly && cargo install cargo-fuzz" >&2; exit 2; }

if [[ $# -gt 0 ]]; then TARGETS=("$@"); else mapfile -t TARGETS < <(cargo +nightly fuzz list); fi
# Release code with debug assertions (integer overflow panics) and AddressSanitizer.
[[ -n ${SKIP_BUILD:-} ]] || cargo +nightly fuzz build --debug-assertions
BIN=fuzz/target/$(rustc +nightly -vV | sed -n 's/^host: //p')/release
for t in "${TARGETS[@]}"; do [[ -x $BIN/$t ]] || { echo "no such fuzz target: $t (targets: $(cargo +nightly fuzz list | tr '\n' ' '))" >&2; exit 2; }; done

echo "machine: $(nproc) cores, load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-18s %12s %8s %10s %8s %7s  %s\n' TARGET EXECUTIONS SECONDS EXEC/S COV CORPUS RESULT
failed=0
for t in "${TARGETS[@]}"; do
  corpus=fuzz/corpus/$t artifacts=fuzz/artifacts/$t log=fuzz/artifacts/$t.log
  mkdir -p "$corpus" "$artifacts" "fuzz/seeds/$t"
  start=$(date +%s)
  rc=0
  # shellcheck disable=SC2086 # FUZZ_ARGS is a list of flags
  timeout --kill-after=10 $((SECS + 300)) "$BIN/$t" "$corpus" "fuzz/seeds/$t" \
    -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" ${FUZZ_ARGS:-} >"$log" 2>&1 || rc=$?
  took=$(($(date +%s) - start))
  # A run that stops early may lack any of these lines.
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  [[ -n $execs ]] || execs=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#' || true)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2 || true)
  corp=$(grep -o 'corp: [0-9]*' "$log" | tail -1 | cut -d' ' -f2 || true)
  if [[ $rc -eq 0 ]]; then
    result=ok
  else
    failed=1
    case "$(cat "$log")" in
      *"out-of-memory"*) result="OUT OF MEMORY" ;;
      *"ERROR: libFuzzer: timeout"*) result="HANG" ;;
      *"deadly signal"* | *"panicked"* | *"ERROR: AddressSanitizer"*) result="CRASH" ;;
      *) result="FAILED (exit $rc)" ;;
    esac
    result="$result: $artifacts/$(ls -t "$artifacts" | head -1 || true), log $log"
  fi
  printf '%-18s %12s %8s %10s %8s %7s  %s\n' "$t" "${execs:-?}" "$took" "$(( ${execs:-0} / (took > 0 ? took : 1) ))" "${cov:-?}" "${corp:-?}" "$result"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $failed
