#!/usr/bin/env bash
# Installs the Debian packages partrain builds and tests with, only those missing: as root
# directly, otherwise through sudo; says clearly what to do when neither is possible.
#   install-deps.sh PACKAGE...                  what the build needs: a failure is an error
#   install-deps.sh --for WHAT --skip VAR PACKAGE...
#                                               what some tests need: says what it installs, and
#                                               for what, before apt-get runs; VAR=1 skips it; a
#                                               failure is one line, and those tests skip
# It says what it will install, and how not to, before apt-get runs: PARTRAIN_SKIP_APT=1 installs
# nothing (the missing packages are named, to install by hand).
set -euo pipefail

purpose=""
skip_var=""
while [ $# -gt 0 ]; do
  case "$1" in
    --for) purpose="$2"; shift 2 ;;
    --skip) skip_var="$2"; shift 2 ;;
    *) break ;;
  esac
done

missing=()
for package in "$@"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

# Optional packages: a skip or a failure is said in one line and leaves their tests to skip.
give_up() {
  if [ -n "$skip_var" ]; then
    echo "partrain: not installing ${missing[*]} ($1): $purpose will skip" >&2
    exit 0
  fi
  exit 1
}
if [ -n "$skip_var" ] && [ "${!skip_var:-0}" = 1 ]; then give_up "$skip_var=1"; fi
if [ "${PARTRAIN_SKIP_APT:-0}" = 1 ]; then
  echo "partrain: PARTRAIN_SKIP_APT=1: not installing the missing Debian packages" \
       "${missing[*]}; install them yourself (apt-get install ${missing[*]})" >&2
  if [ -n "$skip_var" ]; then give_up "PARTRAIN_SKIP_APT=1"; fi
  exit 0  # the build says what it cannot find
fi

if [ -n "$purpose" ]; then
  echo "partrain: installing Debian packages for $purpose with apt-get as root: ${missing[*]}" \
       "(to skip: $skip_var=1, or PARTRAIN_SKIP_APT=1 for every package)" >&2
else
  echo "partrain: installing missing Debian packages with apt-get as root: ${missing[*]}" \
       "(to skip: PARTRAIN_SKIP_APT=1, and install them yourself)" >&2
fi
if [ "$(id -u)" -eq 0 ]; then
  run=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  run=(sudo)
else
  echo "partrain: error: these packages are missing and I can't install them (not root, no" \
       "passwordless sudo): ${missing[*]}" >&2
  echo "partrain: run as root: apt-get install -y ${missing[*]}" >&2
  give_up "not root, no passwordless sudo"
fi
export DEBIAN_FRONTEND=noninteractive
# Daemons among them (munged, slurmctld, slurmd) are not started as services: the tests start
# their own and stop them (policy-rc.d's 101 tells invoke-rc.d to leave services alone).
if [ -n "$skip_var" ] && [ ! -e /usr/sbin/policy-rc.d ] && [ "$(id -u)" -eq 0 ]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
if ! { "${run[@]}" apt-get update -qq &&
       "${run[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"; }; then
  give_up "apt-get failed"
fi
