#!/bin/sh
# lab's fake agent CLI, for tests. It records its argv (NUL-separated), its
# environment (env -0), its working directory and its pid under
# $REC/<LAB_RUN_ID>/, prints like an agent, starts a child process, and then
# does what its prompt (the last argument) asks:
#   FAKE_EXIT=<n>     exit with status n (after FAKE_SLEEP_MS, default 0)
#   FAKE_LINES=<n>    print n numbered lines first
#   FAKE_TICK_MS=<ms> print a numbered line every ms milliseconds
#   FAKE_RUN=<file>   run the shell script <file> (given its path), then exit with its status
#                     (it sees FAKE_REC, its record folder, and FAKE_SESSION_ID, the
#                     --session-id lab passed, if any)
#   FAKE_ASK_MS=<ms>  show Claude Code's "Not logged in" screen for ms milliseconds, then clear it
#   FAKE_HOOKS        like Claude Code, run the hooks of its --settings JSON (Codex: its
#                     -c notify=[...] program) with payloads in the CLIs' formats: a session
#                     start and a prompt, then a permission question once $REC/<id>/go-ask
#                     exists, then a tool's end and the turn's once $REC/<id>/go-stop does
# Without FAKE_EXIT or FAKE_RUN it runs until it is stopped.
# An AFK run (LAB_ISSUE set) runs $REC/../afk.sh when the test wrote one (it sees
# FAKE_PROMPT, the prompt).
REC='@@REC@@'
# Like the real CLIs: a version, and no work without a terminal.
if [ "$1" = --version ]; then echo "0.0.1 (fake agent)"; exit 0; fi
# The CLIs' own sign-in checks (`claude auth status`, `codex login status`):
# signed in unless the credentials lab gave it say "signed-out".
if [ "$1 $2" = "auth status" ]; then
  if grep -qs signed-out "$CLAUDE_CONFIG_DIR/.credentials.json"; then
    echo '{"loggedIn": false, "authMethod": "none"}'; exit 1
  fi
  echo '{"loggedIn": true, "authMethod": "claude.ai"}'; exit 0
fi
if [ "$1 $2" = "login status" ]; then
  if grep -qs signed-out "$CODEX_HOME/auth.json"; then echo "Not logged in" >&2; exit 1; fi
  echo "Logged in using ChatGPT"; exit 0
fi
if [ ! -t 0 ]; then echo "Not logged in · fake agent without a terminal"; exit 1; fi
id=${LAB_RUN_ID:-none}
d="$REC/$id"
mkdir -p "$d"
# Written aside and renamed: a reader never sees half a record.
printf '%s\0' "$@" > "$d/argv.part" && mv "$d/argv.part" "$d/argv"
env -0 > "$d/env.part" && mv "$d/env.part" "$d/env"
pwd > "$d/cwd"
echo $$ > "$d/pid"
prompt=
for a in "$@"; do prompt=$a; done
# The session id lab chose (Claude Code's --session-id), for scripts that
# write the CLI's transcript.
FAKE_SESSION_ID=
prev=
for a in "$@"; do [ "$prev" = --session-id ] && FAKE_SESSION_ID=$a; prev=$a; done
export FAKE_SESSION_ID
# Scripts the agent runs record beside it (its workspace's parent is lab's,
# hidden by the sandbox).
export FAKE_REC="$d"
# And the prompt it was started with (its last argument), for AFK scripts.
export FAKE_PROMPT="$prompt"

num() { # num NAME: the digits after NAME= in the prompt, or nothing
  case "$prompt" in
    *"$1="*) v=${prompt#*"$1="}; printf '%s' "${v%%[!0-9]*}" ;;
  esac
}
exit_code=$(num FAKE_EXIT)
sleep_ms=$(num FAKE_SLEEP_MS)
lines=$(num FAKE_LINES)
tick=$(num FAKE_TICK_MS)
ask=$(num FAKE_ASK_MS)

echo "fake-agent: run $id, $# arguments, prompt of ${#prompt} characters"
sleep 100000 &
echo $! > "$d/child"

if [ -n "$LAB_ISSUE" ] && [ -f "$REC/../afk.sh" ]; then
  sh "$REC/../afk.sh"; code=$?
  echo "fake-agent: afk script exited $code"
  kill "$(cat "$d/child")" 2>/dev/null
  exit "$code"
fi

i=0
while [ "$i" -lt "${lines:-0}" ]; do i=$((i + 1)); echo "fake-agent line $i"; done

if [ -n "$ask" ]; then
  printf '\033[2J\033[H'
  echo "  Not logged in · Please run /login"
  sleep "$(awk -v m="$ask" 'BEGIN{printf "%.3f", m/1000}')"
  printf '\033[2J\033[H'
  echo "fake-agent: logged in, working"
fi

# The --settings JSON (Claude Code) and the notify program (Codex) of the argv.
settings= notify= prev=
for a in "$@"; do
  [ "$prev" = --settings ] && settings=$a
  case "$a" in notify=*) notify=${a#notify=} ;; esac
  prev=$a
done
hook() { # hook EVENT PAYLOAD: runs the command lab configured for EVENT, payload on stdin
  cmd=$(printf '%s' "$settings" | sed -n "s/.*\"$1\":\[{\"hooks\":\[{\"type\":\"command\",\"command\":\"\([^\"]*\)\".*/\1/p")
  if [ -n "$cmd" ]; then printf '%s' "$2" | sh -c "$cmd"; fi
}
notify() { # notify PAYLOAD: runs Codex's notify program, payload as its last argument
  [ -n "$notify" ] || return 0
  payload=$1
  words=$(printf '%s' "$notify" | sed 's/^\[//; s/\]$//; s/","/" "/g')
  eval "set -- $words"
  "$@" "$payload" || true
}
await() { while [ ! -e "$d/$1" ]; do sleep 0.05; done; }
common='"session_id":"2b0c6f0e-5d0a-4f43-9d0f-1d7e3f6b9a11","transcript_path":"/tmp/t.jsonl","cwd":"'"$PWD"'","permission_mode":"default"'
case "$prompt" in
  *FAKE_HOOKS*)
    hook SessionStart "{$common,\"hook_event_name\":\"SessionStart\",\"source\":\"startup\",\"model\":\"sonnet\"}"
    hook UserPromptSubmit "{$common,\"hook_event_name\":\"UserPromptSubmit\",\"prompt\":\"FAKE_HOOKS\"}"
    echo working > "$d/hooked-working"
    await go-ask
    # Like Claude Code: the PermissionRequest hook as the question shows,
    # its permission Notification a few seconds later.
    hook PermissionRequest "{$common,\"hook_event_name\":\"PermissionRequest\",\"tool_name\":\"Bash\",\"tool_input\":{\"command\":\"ls\"},\"permission_suggestions\":[]}"
    # A test that drops `no-notify` in the record folder sees the
    # PermissionRequest alone.
    [ -e "$d/no-notify" ] || hook Notification "{$common,\"hook_event_name\":\"Notification\",\"message\":\"Claude needs your permission to use Bash\",\"title\":\"Permission needed\",\"notification_type\":\"permission_prompt\"}"
    echo waiting > "$d/hooked-waiting"
    await go-stop
    hook PostToolUse "{$common,\"hook_event_name\":\"PostToolUse\",\"tool_name\":\"Bash\",\"tool_input\":{\"command\":\"ls\"},\"tool_response\":{\"stdout\":\"a\"}}"
    # `background` in the record folder: the turn ends with a shell still
    # running in the background (Claude Code 2.1.332's Stop payload).
    tasks='[]'
    [ -e "$d/background" ] && tasks='[{"id":"b7","type":"local_bash","status":"running","description":"cargo test"}]'
    hook Stop "{$common,\"hook_event_name\":\"Stop\",\"stop_hook_active\":false,\"last_assistant_message\":\"Done.\",\"background_tasks\":$tasks}"
    notify '{"type":"agent-turn-complete","thread-id":"b5f6c1c2-1111-2222-3333-444455556666","turn-id":"1","cwd":"/w","input-messages":["FAKE_HOOKS"],"last-assistant-message":"Done."}'
    echo idle > "$d/hooked-idle"
    ;;
esac

case "$prompt" in
  *FAKE_RUN=*)
    f=${prompt#*FAKE_RUN=}; f=${f%% *}
    sh "$f"; code=$?
    echo "fake-agent: script exited $code"
    kill "$(cat "$d/child")" 2>/dev/null
    exit "$code" ;;
esac

if [ -n "$exit_code" ]; then
  [ -n "$sleep_ms" ] && sleep "$(awk -v m="$sleep_ms" 'BEGIN{printf "%.3f", m/1000}')"
  echo "fake-agent: exiting with $exit_code"
  kill "$(cat "$d/child")" 2>/dev/null
  exit "$exit_code"
fi

if [ -n "$tick" ]; then
  pause=$(awk -v m="$tick" 'BEGIN{printf "%.3f", m/1000}')
  n=0
  while :; do n=$((n + 1)); echo "tick $n $(date +%s%N)"; sleep "$pause"; done
fi
while :; do sleep 3600; done
