# Shared helpers of the shell tests (sourced, not run): a scratch folder removed at exit, `fail`
# counting failures, `expect` checking a command's exit status and output, and `finish` printing
# the verdict and exiting with it.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect RC PATTERN -- COMMAND...: COMMAND exits with RC and its output (stdout and stderr, kept
# in $tmp/out) matches the extended regular expression PATTERN (an empty PATTERN matches all).
expect() {
  local want_rc=$1 pattern=$2 rc=0
  shift 3
  "$@" >"$tmp/out" 2>&1 || rc=$?
  if [[ $rc -ne $want_rc ]]; then
    fail "$* -> exit $rc, want $want_rc: $(tail -c 600 "$tmp/out")"
  elif [[ -n "$pattern" ]] && ! grep -Eq -- "$pattern" "$tmp/out"; then
    fail "$* -> output lacks /$pattern/: $(tail -c 600 "$tmp/out")"
  fi
}

# finish WHAT: "N WHAT check(s) failed" and exit 1, or "all WHAT checks passed" and exit 0.
finish() {
  if [[ $failures -ne 0 ]]; then
    echo "$failures $1 check(s) failed"
    exit 1
  fi
  echo "all $1 checks passed"
}
