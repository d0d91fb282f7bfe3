# Shared by the kiln CLI test scripts (sourced): fail counts a failure; expect STATUS PATTERN --
# command... runs it, checks the exit status and that the combined output matches the grep -E
# pattern. The script sets failures=0 and reports it at the end.
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

expect() {
  local want_status="$1" pattern="$2"; shift 3
  local out status
  out="$("$@" 2>&1)"; status=$?
  if [[ $status -ne $want_status ]]; then
    fail "'$*' exited $status, expected $want_status; output:"$'\n'"$out"
  elif ! grep -Eq -- "$pattern" <<<"$out"; then
    fail "'$*' output lacks /$pattern/:"$'\n'"$out"
  else
    echo "ok: $* ~ /$pattern/"
  fi
}
