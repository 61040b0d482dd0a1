#!/usr/bin/env bash
# The boxes and their allowed calls, as docs/DESIGN.md's table states them,
# checked against the compiled objects: each box may call only the boxes
# its row names, and those must all be rows above it (so no circle). A
# call from one box into another is an undefined symbol of the caller's
# object that the other box's object defines (nm). Every object of the
# library must belong to a box.
# Usage: boxes_test.sh SOURCE_DIR BUILD_DIR
DESIGN=$1/docs/DESIGN.md
OBJ=$2/CMakeFiles/hakozuna.dir/src # one folder per layer
source "$(dirname "$0")/script_util.sh"

# The table: "box|file file|callee callee" per row, in order; a file is
# named by its path below src/ without .c (headers have no object).
awk '/<!-- boxes:/ { on = 1; next } /<!-- boxes end/ { on = 0 }
     on && /^\| [a-z_]+ \| [a-z]+ \| `/ {
       n = split($0, cell, "|")
       box = cell[2]; gsub(/ /, "", box)
       files = cell[4]; gsub(/`|,/, "", files); gsub(/src\//, "", files)
       gsub(/[^ ]*\.h/, "", files)
       calls = cell[5]; gsub(/,|—/, "", calls)
       gsub(/^ +| +$/, "", files); gsub(/^ +| +$/, "", calls)
       print box "|" files "|" calls
     }' "$DESIGN" >"$WORK/table"
[ -s "$WORK/table" ] || { echo "FAIL no box table in $DESIGN"; exit 1; }

# Rows name only boxes above them.
awk -F'|' '{ split($3, c, " "); for (i in c) if (!(c[i] in seen))
               print "FAIL box " $1 " may call " c[i] ", which is not a row above it"
             seen[$1] = 1 }' "$WORK/table" >"$WORK/order"
if [ -s "$WORK/order" ]; then cat "$WORK/order"; failures=$((failures + 1)); fi

# file -> box, and every object has a box.
declare -A box_of allowed
while IFS='|' read -r box files calls; do
  for f in $files; do box_of[${f%.c}]=$box; done
  allowed[$box]=" $calls "
done <"$WORK/table"
objects=$(cd "$OBJ" && ls ./*/*.c.o | sed 's|^\./||; s|\.c\.o$||')
for f in $objects; do
  [ -n "${box_of[$f]:-}" ] || fail "src/$f.c belongs to no box in docs/DESIGN.md"
done

# symbol -> box and file of the object defining it.
for f in $objects; do
  nm --defined-only "$OBJ/$f.c.o" |
    awk -v b="${box_of[$f]:-?}" -v f="$f" '$2 ~ /[TDBR]/ { print $3, b, f }'
done | sort -u >"$WORK/defined"

calls=0
for f in $objects; do
  from=${box_of[$f]:-?}
  nm -u "$OBJ/$f.c.o" | awk '{ print $2 }' | sort -u >"$WORK/undefined"
  while read -r sym to _; do
    [ "$to" = "$from" ] && continue
    calls=$((calls + 1))
    case "${allowed[$from]:-}" in
      *" $to "*) ;;
      *) fail "box $from (src/$f.c) calls $sym of box $to: docs/DESIGN.md does not allow $from -> $to" ;;
    esac
  done < <(join "$WORK/undefined" "$WORK/defined")
done
[ "$calls" -gt 50 ] || fail "only $calls calls between boxes found: is $OBJ the library's objects?"

# Inside a box of several files, calls go one way too: docs/DESIGN.md's
# file order table lists such a box's files bottom first, and a file may
# call only the files listed before it (so no circle between them).
awk '/<!-- file order:/ { on = 1; next } /<!-- file order end/ { on = 0 }
     on && /^\| [a-z_]+ \| `/ {
       n = split($0, cell, "|"); box = cell[2]; gsub(/ /, "", box)
       files = cell[3]; gsub(/`|,/, "", files); gsub(/src\//, "", files)
       gsub(/\.c/, "", files); gsub(/^ +| +$/, "", files)
       print box "|" files
     }' "$DESIGN" >"$WORK/order_table"
[ -s "$WORK/order_table" ] || fail "no file order table in $DESIGN"
while IFS='|' read -r box files; do
  for f in $objects; do
    [ "${box_of[$f]:-}" = "$box" ] || continue
    case " $files " in *" $f "*) ;; *) fail "src/$f.c of box $box is not in its file order";; esac
  done
  later=" $files "
  for f in $files; do
    later=${later/ $f / }
    [ -f "$OBJ/$f.c.o" ] || { fail "file order of $box names src/$f.c, which is not built"; continue; }
    nm -u "$OBJ/$f.c.o" | awk '{ print $2 }' | sort -u >"$WORK/undefined"
    join "$WORK/undefined" "$WORK/defined" | while read -r sym _ g; do
      case "$later" in
        *" $g "*) echo "FAIL src/$f.c uses $sym of src/$g.c, which comes after it in box $box's file order" ;;
      esac
    done >>"$WORK/inside"
  done
done <"$WORK/order_table"
if [ -s "$WORK/inside" ]; then cat "$WORK/inside"; failures=$((failures + 1)); fi

finish boxes "$(wc -l <"$WORK/table") boxes, $calls calls between them, all allowed"
