# Shared helpers for the benchmark scripts. Source it; needs wrk and curl.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LAB=${LAB:-$ROOT/target/release/lab}
[ -x "$LAB" ] || { echo "build first: cargo build --release" >&2; exit 1; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_lab DIR [DATABASE_URL]: starts lab serve in the background; sets URL, TOKEN, LAB_PID.
start_lab() {
  local dir=$1 db=${2:-}
  local port; port=$(free_port)
  mkdir -p "$dir"
  if [ -n "$db" ]; then
    LAB_LOG=warn "$LAB" serve --data-dir "$dir/data" --listen "127.0.0.1:$port" --database-url "$db" >"$dir/lab.log" 2>&1 &
  else
    LAB_LOG=warn "$LAB" serve --data-dir "$dir/data" --listen "127.0.0.1:$port" >"$dir/lab.log" 2>&1 &
  fi
  LAB_PID=$!
  URL="http://127.0.0.1:$port"
  for _ in $(seq 1 100); do curl -sf "$URL/healthz" >/dev/null && break; sleep 0.1; done
  TOKEN=$(cat "$dir/data/token")
}

api() { curl -sf -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' "$@"; }

# wrk_run URL SECONDS: prints "req_per_s p50_ms p99_ms"
wrk_run() {
  local out
  out=$(wrk -t"${WRK_THREADS:-2}" -c64 -d"${2}s" --latency -H "Authorization: Bearer $TOKEN" "$1")
  local rps p50 p99
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1=="50%" {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  echo "$rps $(to_ms "$p50") $(to_ms "$p99")"
}

to_ms() { # wrk prints 1.23ms, 456.00us or 1.2s
  local v=$1
  case $v in
    *us) awk -v x="${v%us}" 'BEGIN{printf "%.3f", x/1000}' ;;
    *ms) awk -v x="${v%ms}" 'BEGIN{printf "%.3f", x}' ;;
    *s) awk -v x="${v%s}" 'BEGIN{printf "%.3f", x*1000}' ;;
    *) echo "$v" ;;
  esac
}
