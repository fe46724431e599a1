#!/usr/bin/env bash
# libspillway_cupti_injection.so must export InitializeInjection and nothing else, and must not
# depend on libcupti (it loads it with dlopen). Usage: cupti_injection_exports_test.sh LIBRARY
set -euo pipefail
lib=$1
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort)
if [[ "$exported" != "InitializeInjection" ]]; then
  echo "unexpected exports in $lib:"; echo "$exported"; exit 1
fi
if readelf -d "$lib" | grep -q 'libcupti'; then
  echo "$lib depends on libcupti:"; readelf -d "$lib" | grep NEEDED; exit 1
fi
echo "ok: $lib exports only InitializeInjection and does not link libcupti"
