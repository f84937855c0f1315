# arguments.sh — what every script of tools/ and bench/ does with its command line. Each
# sources it first thing, before it reads or writes anything:
#
#   . "$(dirname "$0")/lib/arguments.sh"          (from bench/: ../tools/lib/arguments.sh)
#
# -h or --help anywhere on the command line prints the script's opening comment, which says
# how to call it, and exits 0. The script then refuses what it does not take with
# `refuse MESSAGE` (one line on stderr, exit 2); `refuse_options ALLOWED... -- "$@"` refuses
# the first argument that starts with - and is none of ALLOWED. tests/check_scripts.py runs
# every script with --help and with an unknown flag.
script_name=$(basename "$(dirname "$0")")/$(basename "$0")

for argument in "$@"; do
  if [[ $argument == -h || $argument == --help ]]; then
    sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"  # the comment between the #! line and the code
    exit 0
  fi
done
unset argument

refuse() {
  echo "$script_name: $*; see $script_name --help" >&2
  exit 2
}

refuse_options() {
  local allowed=() argument
  while [[ $1 != -- ]]; do allowed+=("$1"); shift; done
  shift
  for argument in "$@"; do
    [[ $argument == -* && " ${allowed[*]} " != *" $argument "* ]] && refuse "unknown option $argument"
  done
  return 0
}

# refuse_what_meson_refuses SUBCOMMAND ARGS...: for a script that hands ARGS to `meson
# SUBCOMMAND`, refuses them where meson would, by meson's own parser: run on a build folder
# that cannot exist, it exits 2 on a wrong argument and 1 (no such folder) on right ones.
refuse_what_meson_refuses() {
  local subcommand=$1 error
  shift
  error=$(meson "$subcommand" -C /nonexistent/gatedgrad-arguments "$@" 2>&1 >/dev/null) && return 0
  [[ $? == 2 ]] && refuse "meson $subcommand: $(grep -m1 'error:' <<<"$error" | sed 's/^.*error: //')"
  return 0
}
