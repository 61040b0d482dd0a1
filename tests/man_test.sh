#!/usr/bin/env bash
# The manual pages keep in step with the code: hakozuna(3) describes every
# option the library reads (the names and defaults it prints with
# HZ_VERBOSE=1), and no option it does not read; the README's options table
# names them all; hakozuna(1) describes every command of bin/hakozuna and
# run's --guard; man renders both pages without a warning.
# Usage: man_test.sh LIBRARY SOURCE_DIR
source "$(dirname "$0")/script_util.sh"
LIB=$1
SRC=$2
page3=$SRC/man/hakozuna.3
page1=$SRC/man/hakozuna.1

# The library's options: "hakozuna: option HZ_NAME=value  (...)".
env -i HZ_VERBOSE=1 LD_PRELOAD="$LIB" /bin/ls / 2>"$WORK/verbose" >/dev/null
sed -n 's/^hakozuna: option \(HZ_[A-Z_]*\)=\([^ ]*\) .*/\1 \2/p' \
  "$WORK/verbose" | sort >"$WORK/library"
[ -s "$WORK/library" ] || fail "the library printed no options"
# The page's: '.BR HZ_NAME " (default VALUE)"' in the ENVIRONMENT section.
sed -n '/^\.SH ENVIRONMENT/,/^\.SH /s/^\.BR \(HZ_[A-Z_]*\) " (default \(.*\))"$/\1 \2/p' \
  "$page3" | sort >"$WORK/page"

while read -r name value; do
  documented=$(awk -v n="$name" '$1 == n { $1 = ""; print substr($0, 2) }' "$WORK/page")
  if [ -z "$documented" ]; then
    fail "hakozuna(3) does not describe $name"
    continue
  fi
  # Numeric defaults must agree (HZ_VERBOSE is 1 here: we set it).
  case "$name:$value:$documented" in
    HZ_VERBOSE:*) ;;
    *:[0-9]*:[0-9]*)
      [ "$value" = "$documented" ] ||
        fail "$name: the library's default is $value, hakozuna(3) says $documented" ;;
  esac
  grep -q "\`$name\`" "$SRC/README.md" ||
    grep -q "\`${name%_*}_\*\`" "$SRC/README.md" ||
    fail "the README's options table does not name $name"
done <"$WORK/library"
while read -r name _; do
  grep -q "^$name " "$WORK/library" ||
    fail "hakozuna(3) describes $name, which the library does not read"
done <"$WORK/page"
[ "$failures" -eq 0 ] &&
  pass "hakozuna(3) and the README describe the $(wc -l <"$WORK/library") options the library reads"

# hakozuna(1): every command the script knows, and run --guard.
commands=$(sed -n 's/^    \([a-z]*\)) echo "usage: hakozuna .*/\1/p' "$SRC/bin/hakozuna")
[ -n "$commands" ] || fail "no commands found in bin/hakozuna"
for c in $commands; do
  grep -q "^\.B $c\$" "$page1" || fail "hakozuna(1) does not describe '$c'"
done
grep -q 'guard' "$page1" || fail "hakozuna(1) does not describe run --guard"
pass "hakozuna(1) describes $(echo $commands | wc -w) commands"

# man renders both without a warning.
if command -v man >/dev/null; then
  for page in "$page1" "$page3"; do
    warnings=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
    [ -z "$warnings" ] || fail "man -l $(basename "$page"): $warnings"
    MANWIDTH=80 man -l "$page" 2>/dev/null | grep -q '^NAME' ||
      fail "man -l $(basename "$page") renders no NAME section"
  done
  pass "man renders both pages"
fi
finish man
