#!/usr/bin/env bash
# GET /api/v1/repos/{id}/resolve against GET /healthz of the same server,
# alternated in one run, on SQLite and (with LAB_TEST_DATABASE_URL) PostgreSQL.
# usage: bench/resolve.sh [SECONDS_PER_ROUND] [ROUNDS]
source "$(dirname "$0")/lib.sh"
secs=${1:-10}; rounds=${2:-3}
backends=(sqlite)
[ -n "${LAB_TEST_DATABASE_URL:-}" ] && backends+=(postgres)
for backend in "${backends[@]}"; do
  dir=$(mktemp -d)
  db=""
  if [ "$backend" = postgres ]; then
    name=lab_bench_$$
    psql "$LAB_TEST_DATABASE_URL" -qc "DROP DATABASE IF EXISTS $name" -c "CREATE DATABASE $name" >/dev/null
    db="${LAB_TEST_DATABASE_URL%/*}/$name"
  fi
  start_lab "$dir" "$db"
  git init -q -b main "$dir/repo" && git -C "$dir/repo" commit -q --allow-empty -m first
  api -d "{\"name\":\"bench\",\"path\":\"$dir/repo\",\"afk_model_default\":\"opus\"}" "$URL/api/v1/repos" >/dev/null
  api -X PATCH -d '{"providers":{"claude-code":{"afk_options":{"ultracode":true}}}}' "$URL/api/v1/settings" >/dev/null
  echo "== $backend: $rounds rounds of ${secs}s each, wrk -t${WRK_THREADS:-2} -c64"
  for r in $(seq 1 "$rounds"); do
    read -r h_rps h_p50 h_p99 < <(wrk_run "$URL/healthz" "$secs")
    read -r r_rps r_p50 r_p99 < <(wrk_run "$URL/api/v1/repos/bench/resolve?kind=afk" "$secs")
    ratio=$(awk -v a="$r_rps" -v b="$h_rps" 'BEGIN{printf "%.2f", a/b}')
    echo "round $r: healthz $h_rps req/s (p50 $h_p50 ms, p99 $h_p99 ms) | resolve $r_rps req/s (p50 $r_p50 ms, p99 $r_p99 ms) | ratio $ratio"
  done
  echo "cache: $(api "$URL/api/v1/status" | python3 -c 'import json,sys; print(json.load(sys.stdin)["cache"])')"
  kill "$LAB_PID"; wait "$LAB_PID" 2>/dev/null || true
  rm -rf "$dir"
done
