#!/usr/bin/env bash
# Build ./.whl-lite, the wheels a device call carries (the lent GPU machine has torch and
# transformers but no Hydra, OmegaConf, antlr, submitit or plotly; every sweep imports the dashboard):
#   bash benchmarks/whl-lite.sh      then, in a device call: carry [".whl-lite"] (the run-gpu.sh
#   scripts install it into /tmp/site). Also `cp -r ../shared/dynamo-harness .harness` for the
#   harness parts. A call carries at most 64 MiB with the tracked files (55 MB on 2026-12-06), so the
#   plotly wheel loses what the dashboard does not use: the Jupyter widget bundle, the JupyterLab
#   extension and the sample datasets (9.7 MB to 5.2 MB; `to_html` with plotly.js still works).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
grep -qxF '/.whl-lite/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo '/.whl-lite/' >> .git/info/exclude; }
mkdir -p .whl-lite
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d .whl-lite \
  hydra-core==1.3.8 omegaconf==2.3.1 submitit==1.5.4 plotly==7.1.0 narwhals==2.29.0
# antlr4 4.9.3 (what omegaconf 2.3 needs) ships only as source: its pure-Python wheel is built here.
ls .whl-lite/antlr4_python3_runtime-4.9.3-*.whl >/dev/null 2>&1 || python3 -m pip wheel -q --no-deps -w .whl-lite antlr4-python3-runtime==4.9.3
python3 - <<'PY'
import os, zipfile
src = ".whl-lite/plotly-7.1.0-py3-none-any.whl"
unused = ("plotly/labextension/", "plotly-7.1.0.data/data/share", "plotly/package_data/widgetbundle.js",
          "plotly/package_data/datasets/")
with zipfile.ZipFile(src) as zi, zipfile.ZipFile(src + ".tmp", "w", zipfile.ZIP_DEFLATED) as zo:
    for info in zi.infolist():
        if info.filename.startswith(unused):
            continue
        data = zi.read(info.filename)
        if info.filename.endswith("RECORD"):  # the removed files' lines go too
            data = b"\n".join(line for line in data.split(b"\n") if not line.decode().startswith(unused))
        zo.writestr(info, data)
os.replace(src + ".tmp", src)
PY
du -sh .whl-lite; ls .whl-lite
