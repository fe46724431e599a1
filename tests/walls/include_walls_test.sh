#!/bin/sh
# The include walls (cmake/SpillwayHeaders.cmake, docs/architecture.md "Include walls"): each line
# of CASES is "LIBRARY FLAGS_FILE HEADER found|walled". The header is compiled alone with the
# library's include directories (one per line of FLAGS_FILE); "found" must compile, "walled" must
# fail because that header is not found. Usage: include_walls_test.sh CXX CASES
set -u
cxx=$1
cases=$2
work=${TMPDIR:-/tmp}/include_walls.$$
mkdir -p "$work"
failures=0
count=0
while read -r library flags header expect; do
  [ -z "$library" ] && continue
  count=$((count + 1))
  includes=$(sed -e '/^$/d' -e '\#^/usr/include$#d' -e 's/^/-I/' "$flags" | sort -u | tr '\n' ' ')
  printf '#include "%s"\n' "$header" > "$work/case.cc"
  # shellcheck disable=SC2086  # one -I word per include directory
  if "$cxx" -std=c++20 -fsyntax-only $includes "$work/case.cc" > "$work/out" 2>&1; then
    result=found
  elif grep -q "$header: No such file or directory" "$work/out"; then
    result=walled
  else
    result=error
  fi
  if [ "$result" != "$expect" ]; then
    failures=$((failures + 1))
    echo "FAIL: $library including \"$header\": expected $expect, got $result"
    sed -n '1,5p' "$work/out"
  else
    echo "ok: $library: \"$header\" $expect"
  fi
done < "$cases"
rm -rf "$work"
if [ "$count" -eq 0 ]; then
  echo "FAIL: no cases in $cases"
  exit 1
fi
echo "$count case(s), $failures failure(s)"
[ "$failures" -eq 0 ]
