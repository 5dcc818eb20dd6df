#!/usr/bin/env bash
# Does this host's g++ build a shared library whose std::regex works when Python dlopens it? The
# AOTInductor .so died in std::regex (parse_device_str) at load, on CPU and GPU alike. Prints the
# toolchain's facts, then builds the same one-function library twice: as g++ links it by default,
# and with the shared libstdc++ named first (-l:libstdc++.so.6).
set -u
work=$(mktemp -d)
g++ --version | head -1
echo "libstdc++.so for g++: $(g++ -print-file-name=libstdc++.so)"
echo "libstdc++.a for g++: $(g++ -print-file-name=libstdc++.a)"
ls -la "$(dirname "$(g++ -print-file-name=libstdc++.a)")"/libstdc++* 2>&1
for c in clang++ g++-11 g++-12 g++-13 g++-14; do command -v "$c" >/dev/null && echo "also: $c"; done
cat > "$work/r.cpp" <<'CPP'
#include <regex>
#include <string>
extern "C" int parse(const char* s) {
  std::regex re("(cuda|cpu)(:([0-9]+))?");
  std::smatch m;
  std::string str(s);
  return std::regex_match(str, m, re) ? 1 : 0;
}
CPP
for variant in default shared-first; do
  extra=""; [ "$variant" = shared-first ] && extra="-l:libstdc++.so.6"
  g++ -shared -fPIC -O2 -o "$work/$variant.so" "$work/r.cpp" $extra
  needed=$(readelf -d "$work/$variant.so" | grep -c 'NEEDED.*libstdc++')
  copies=$(nm -C --defined-only "$work/$variant.so" | grep -c 'std::locale::')
  python3 -c "import ctypes, sys; print(ctypes.CDLL(sys.argv[1]).parse(b'cuda:0'))" "$work/$variant.so" \
    > "$work/out" 2>&1
  echo "regex .so $variant: exit $? answer $(cat "$work/out" | tail -1) NEEDED-libstdc++ $needed std::locale-defined $copies"
done
