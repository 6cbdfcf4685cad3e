#!/usr/bin/env bash
# The Python the torch-labelled tests run (docs/testing.md): a virtual environment VENV holding
# the pinned REQUIREMENTs (torch==X HolisticTraceAnalysis==Y), made once and reused by every
# later run and checkout on the machine. A stamp file in VENV records what a finished install
# holds, so a second call returns at once.
#   install-torch-venv.sh VENV REQUIREMENT...
# Prints VENV/bin/python on stdout when the environment is ready, nothing otherwise; says in one
# line on stderr why it is not (PARTRAIN_SKIP_TORCH=1, PyPI unreachable, no venv module).
set -euo pipefail

venv=$1
shift
want="$*"
stamp=$venv/partrain-venv.stamp
ready() { [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; }
skip() {
  echo "partrain: not installing $want for the torch tests ($1): they will skip" >&2
  exit 0
}

if ready; then
  echo "$venv/bin/python"
  exit 0
fi
[ "${PARTRAIN_SKIP_TORCH:-0}" = 1 ] && skip "PARTRAIN_SKIP_TORCH=1"

index=${PIP_INDEX_URL:-https://pypi.org/simple}
python3 - "$index" <<'PY' 2>/dev/null || skip "$index cannot be reached; PARTRAIN_SKIP_TORCH=1 says so without trying"
import sys, urllib.request
urllib.request.urlopen(sys.argv[1].rstrip("/") + "/pip/", timeout=15)
PY

mkdir -p "$(dirname "$venv")"
# One install at a time per environment: two checkouts' `make test` may start together.
exec 9>"$venv.lock"
flock 9
if ready; then
  echo "$venv/bin/python"
  exit 0
fi
echo "partrain: installing $want into $venv for the torch tests (about 4 GB once, reused" \
     "afterwards; to skip: PARTRAIN_SKIP_TORCH=1 make test)" >&2
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" >&2 ||
    skip "python3 -m venv failed: on Debian, apt-get install python3-venv"
fi
# An interrupted install resumes: pip keeps what is already there.
"$venv/bin/python" -m pip install --quiet --no-cache-dir --disable-pip-version-check "$@" >&2 ||
  skip "pip install failed (above)"
echo "$want" >"$stamp"
echo "$venv/bin/python"
