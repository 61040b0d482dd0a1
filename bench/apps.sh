#!/usr/bin/env bash
# Real applications under an allocator: bench/apps.py does the work (see
# its --help). The harness calls `bench/apps.sh LIB CASE`.
exec /usr/bin/python3 "$(dirname "$0")/apps.py" "$@"
