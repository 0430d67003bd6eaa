#!/bin/sh
# setup-provers.sh -- make Frama-C 25 (Debian 12) and its provers usable by WP.
#
#   usage: sh verify/setup-provers.sh [why3.conf path]   (default: $HOME/.why3.conf)
#
# 1. If a tool is missing, installs frama-c-base why3 z3 cvc4 cvc5 gappa
#    libgmp-dev with apt-get (needs root; CI calls it as root). Set
#    KVC_NO_APT=1 to forbid this: a missing tool is then an error (ctest does so).
# 2. Writes a Why3 configuration at the given path (why3 config detect),
#    registers cvc5 by hand with the driver why3-cvc5.drv next to this script
#    (Why3 1.5.1 has no cvc5 driver), and sets memlimit 4000 and
#    running_provers_max 2.
# Frama-C reads $WHY3CONFIG if set, else ~/.why3.conf; with neither, WP finds
# no prover and only Qed runs. Idempotent: running it again changes nothing.
set -eu
case $0 in */*) HERE=${0%/*} ;; *) HERE=. ;; esac
HERE=$(cd "$HERE" && pwd)
CONF=${1:-$HOME/.why3.conf}
TOOLS="frama-c why3 z3 cvc4 cvc5 gappa"

missing=""
for t in $TOOLS; do
  command -v "$t" >/dev/null 2>&1 || missing="$missing $t"
done
if [ -n "$missing" ]; then
  if [ "${KVC_NO_APT:-0}" = 1 ]; then
    echo "setup-provers: missing:$missing" >&2
    echo "setup-provers: install them first (as root): sh $HERE/setup-provers.sh" >&2
    exit 1
  fi
  echo "setup-provers: missing:$missing -- installing with apt-get"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    frama-c-base why3 z3 cvc4 cvc5 gappa libgmp-dev
fi

case $CONF in */*) mkdir -p "${CONF%/*}" ;; esac
why3 config detect -C "$CONF" >/dev/null 2>&1
# cvc5 1.0.3 is not known to Why3 1.5.1: register it by hand (once).
if ! grep -q 'shortcut = "cvc5"' "$CONF"; then
  CVC5=$(command -v cvc5)
  VER=$(cvc5 --version | sed -n 's/^This is cvc5 version \([^ ]*\).*/\1/p')
  cat >>"$CONF" <<EOC

[prover]
command = "$CVC5 --stats --tlimit-per=%t000 --lang=smt2 %f"
command_steps = "$CVC5 --stats --rlimit=%S --lang=smt2 %f"
driver = "$HERE/why3-cvc5.drv"
editor = ""
in_place = false
interactive = false
name = "CVC5"
shortcut = "cvc5"
version = "$VER"
EOC
fi
# a checkout that moved: point the cvc5 section at this folder's driver
sed -i "s|^driver = \".*/why3-cvc5.drv\"|driver = \"$HERE/why3-cvc5.drv\"|" "$CONF"
# z3 runs out of the default 1000 MB on float goals; 2 provers at a time.
sed -i 's/^memlimit = .*/memlimit = 4000/; s/^running_provers_max = .*/running_provers_max = 2/' "$CONF"

# Check that WP now sees every prover the proof jobs use.
detect=$(WHY3CONFIG="$CONF" frama-c -wp-detect 2>&1) || { echo "$detect" >&2; exit 1; }
echo "$detect"
for p in Z3 CVC4 CVC5 Gappa; do
  if ! echo "$detect" | grep -q "\[wp\] Prover *$p "; then
    echo "setup-provers: WP does not see prover $p (config $CONF)" >&2
    exit 1
  fi
done
echo "setup-provers: why3 config written to $CONF"
