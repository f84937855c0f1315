#!/bin/sh
# check_arguments.sh PROGRAM: tutorial 12's one flag. --help prints the usage and exits 0;
# a mistyped flag or a --steps that is not a count is refused with the usage, exit 2, and
# nothing is trained.
program=$1
fail() { echo "check_arguments: $*" >&2; exit 1; }
out=$("$program" --help) || fail "--help exits $?"
case $out in "usage: tutorial_12_data_parallel [--steps N]"*) ;; *) fail "--help printed: $out" ;; esac
for args in "--stpes 5" "--steps many" "--steps 0" "--steps 5 more"; do
  # shellcheck disable=SC2086
  err=$("$program" $args 2>&1 >/dev/null)
  code=$?
  [ "$code" = 2 ] || fail "$args: exit $code, not 2"
  case $err in *"'$args' is not what it takes; usage:"*) ;; *) fail "$args: said $err" ;; esac
done
echo "check_arguments: --help prints the usage; a bad argument is refused with it"
