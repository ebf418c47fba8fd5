# The GPU checks' verdicts, sourced by gpu-checks.sh (and by verdict-test.sh, which feeds them
# canned runs on the CPU): a run under the shim counts only if its report shows the shim was
# there, so a missing library or report can never pass as "identical".
# Needs: $out (the runs' folder: NAME.{eager,shim}.{out,err,rc}, NAME.jsonl) and `status`.
fail() { echo "FAIL $*"; status=1; }
summary() { python3 -c '
import json, sys
try:
    s = ([json.loads(l) for l in open(sys.argv[1]) if "\"summary\"" in l] or [{}])[-1]
except (OSError, ValueError):
    s = {}
out = []
for key in sys.argv[2:]:
    v = s
    for k in key.split("."):
        v = v.get(k, 0) if isinstance(v, dict) else 0
    out.append(str(v))
print(" ".join(out))' "$@"; }
# shim_ran REPORT [RC]: the report's summary counts launches, ops or launches into the program's
# own capture (the shim was preloaded, saw the program's work and wrote its report; the last alone
# where every launch was inside the program's capture). A program that dies of signal RC-128 on
# purpose writes no summary: its report's last record must then be that signal.
shim_ran() {
  local rep=$1 rc=${2:-0} l
  if [ "$rc" -gt 128 ] 2>/dev/null; then
    tail -n 1 "$rep" 2> /dev/null | grep -q "\"event\":\"signal\".*\"signal\":$((rc - 128))[,}]" && return 0
    echo "no record of signal $((rc - 128)) in the report $rep"; return 1
  fi
  l=$(summary "$rep" launches ops ops_in_program_captures)
  case $l in
    *[!0-9\ ]*|'') ;;
    '0 0 0') ;;
    *) return 0 ;;
  esac
  [ -s "$rep" ] || { echo "no report $rep (was libcugraft.so preloaded?)"; return 1; }
  echo "the report $rep has no summary with launches or ops (launches, ops, ops in the program's captures: '${l}')"; return 1
}
compare() { # NAME KEY [RC]: both exited RC (default 0), the shim ran, lines starting with KEY identical
  local n=$1 key=$2 want=${3:-0} a b why
  [ "$(cat "$out/$n.eager.rc" 2> /dev/null)" = "$want" ] || { fail "$n: eager exited $(cat "$out/$n.eager.rc" 2> /dev/null)"; return; }
  [ "$(cat "$out/$n.shim.rc" 2> /dev/null)" = "$want" ] || { fail "$n: shim exited $(cat "$out/$n.shim.rc" 2> /dev/null): $(tail -2 "$out/$n.shim.err" 2> /dev/null)"; return; }
  why=$(shim_ran "$out/$n.jsonl" "$want") || { fail "$n: $why"; return; }
  a=$(grep "^$key" "$out/$n.eager.out" | md5sum); b=$(grep "^$key" "$out/$n.shim.out" | md5sum)
  [ -n "$(grep "^$key" "$out/$n.eager.out")" ] || { fail "$n: no '$key' lines"; return; }
  [ "$a" = "$b" ] || { fail "$n: '$key' differs under the shim"; return; }
  echo "ok $n: identical; $(summary "$out/$n.jsonl" launches graph_launches ops_replayed ops_eager escaped_launches audit.driver_launches_seen fallbacks.cost_gate | \
    awk '{printf "launches %s graph_launches %s replayed %s eager %s escaped %s cupti_launches %s cost_gated %s", $1,$2,$3,$4,$5,$6,$7}')"
}
compare_exit() { # NAME: the same exit status both ways (a program may abort on purpose), then compare
  local n=$1 e s
  e=$(cat "$out/$n.eager.rc") s=$(cat "$out/$n.shim.rc")
  if [ "$e" != "$s" ]; then fail "$n: exit $e eager, $s under the shim: $(tail -n 2 "$out/$n.shim.err")"; return; fi
  [ "$e" = 0 ] || echo "   $n exits $e both ways"
  compare "$n" checksum "$e"
}
same_losses() { # NAME: both runs exited 0, the shim ran, the loss files (NAME.{eager,shim}.loss) are identical
  local n=$1 why
  if [ "$(cat "$out/$n.eager.rc" 2> /dev/null)$(cat "$out/$n.shim.rc" 2> /dev/null)" != 00 ]; then
    fail "$n: rc $(cat "$out/$n.eager.rc" 2> /dev/null)/$(cat "$out/$n.shim.rc" 2> /dev/null) $(tail -n 3 "$out/$n.shim.out" 2> /dev/null)"; return 1
  fi
  why=$(shim_ran "$out/$n.jsonl") || { fail "$n: $why"; return 1; }
  [ -s "$out/$n.eager.loss" ] && cmp -s "$out/$n.eager.loss" "$out/$n.shim.loss" || { fail "$n: losses differ"; return 1; }
}
