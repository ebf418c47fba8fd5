# both ends of every integer option's range (shim/base/options.def), on programs with a launch of an
# unproven shape (alike), every launch form (fourway) and changing shapes (conf_shapes): the same
# results as eager

def=$here/../../shim/base/options.def
ends=$(awk -F, '/^X\(/ && $3 ~ /INT/ { gsub(/[" ]/, "", $2); gsub(/ /, "", $5); gsub(/ /, "", $6);
                 print $2 "=" $5; print $2 "=" $6 }' "$def")
[ -n "$ends" ] || fail "no integer option found in $def"
for p in alike "fourway --iters 12" conf_shapes; do
  eager "e-${p%% *}" $progs/$p
  for kv in $ends; do
    (export "$kv"; shim "s-${p%% *}-$kv" $progs/$p)
    same_result "e-${p%% *}" "s-${p%% *}-$kv"
  done
done
