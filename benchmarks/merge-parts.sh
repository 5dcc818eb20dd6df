# Sourced by the merge.sh scripts of benchmarks/h200-*: a sweep run on the GPU in parts (one device
# call each, a tarball of its sweep directory) put back together as one sweep directory.

# unpack_parts FROM MERGED: every part's jobs into a fresh MERGED/jobs. A part is a tarball in FROM
# (as a device call leaves it) or a folder in FROM with the same contents (as committed, unpacked).
unpack_parts() {
  local from=$1 merged=$2 tarball part
  rm -rf "$merged" && mkdir -p "$merged/jobs"
  for tarball in "$from"/*.tar.gz; do
    [ -e "$tarball" ] || continue
    part=$(mktemp -d)
    tar -C "$part" -xzf "$tarball"
    [ -d "$part/sweep/jobs" ] && cp -r "$part"/sweep/jobs/* "$merged/jobs/"
    rm -rf "$part"
  done
  for part in "$from"/*/sweep/jobs; do
    [ -d "$part" ] && cp -r "$part"/* "$merged/jobs/"
  done
  return 0
}

# require_planned MERGED ARGS...: every job the sweep ARGS plan has a result in MERGED, or exit 1
# naming the missing ones (a re-run would otherwise measure them here, on the wrong machine).
require_planned() {
  local merged=$1 missing
  shift
  missing=$(.venv/bin/python -m orchestrator "$@" --dry-run | grep -oE '^  [0-9a-f]{12}' | tr -d ' ' \
    | while read -r id; do [ -f "$merged/jobs/$id/result.json" ] || echo "$id"; done)
  if [ -n "$missing" ]; then echo "not merged, jobs missing: $missing"; exit 1; fi
}
