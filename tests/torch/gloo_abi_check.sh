#!/bin/sh
# Checks that graphdump's binaries use the gloo compiled into libtorch_cpu and nothing of the
# gloo headers they were compiled with (Debian's libgloo-dev, older than the wheel's gloo; see
# ConnectGloo in src/torch/host/distributed.cc): no file given defines a symbol of namespace
# gloo (an inline gloo function or vtable compiled from those headers, which libtorch_cpu's
# calls could bind to), nor a shared_ptr control block that would destroy a gloo object by
# those headers' layout; and no executable or library given needs Debian's libgloo.so.
# usage: gloo_abi_check.sh FILE... (static libraries, executables, shared objects)
status=0
for file in "$@"; do
  defined=$(nm -C --defined-only "$file" 2>/dev/null |
            grep -E ' [A-Za-z] ((vtable|typeinfo|typeinfo name|VTT|construction vtable) for )?gloo::|_Sp_counted_[a-z_]*<gloo::' |
            head -5)
  if [ -n "$defined" ]; then
    echo "$file defines gloo symbols compiled from the gloo headers:"
    echo "$defined"
    status=1
  fi
  if readelf -d "$file" 2>/dev/null | grep -q 'NEEDED.*libgloo'; then
    echo "$file links Debian's libgloo: $(readelf -d "$file" | grep 'NEEDED.*libgloo')"
    status=1
  fi
done
[ $status -eq 0 ] && echo "no gloo symbol defined, no libgloo needed in $# files"
exit $status
