# dlsym and dlvsym answered from the caller's scope as glibc does: the same answers with the shim
# as without, but for the driver's functions, which are handed out as cugraft's wrappers

eager e "$progs/dlscope" "$progs/libdlscope_a.so"
shim s "$progs/dlscope" "$progs/libdlscope_a.so"
same_result e s
for kv in a.default=b_func a.vdefault=b_func a.vdefault_wrong=none a.next=b a.vnext=b \
          main.handle=found main.vhandle=same main.default=none \
          cuda.dlsym=libcuda cuda.dlvsym=same cuda.vdefault=same; do
  [ "$(field "${kv%%=*}" "$tmp/e.out")" = "${kv#*=}" ] || fail "without the shim ${kv%%=*} is $(field "${kv%%=*}" "$tmp/e.out")"
done
diff <(grep -v '^cuda\.' "$tmp/e.out") <(grep -v '^cuda\.' "$tmp/s.out") > "$tmp/diff" ||
  fail "lookups answered differently under the shim: $(tr '\n' ' ' < "$tmp/diff")"
# the driver's function is handed out as the wrapper, through dlsym and dlvsym alike
for kv in cuda.dlsym=elsewhere cuda.dlvsym=same cuda.vdefault=same; do
  [ "$(field "${kv%%=*}" "$tmp/s.out")" = "${kv#*=}" ] || fail "under the shim ${kv%%=*} is $(field "${kv%%=*}" "$tmp/s.out")"
done
