# bench/peer_lib.sh - what the same-run benches against PyTorch (gpt_char.sh, resnet20.sh)
# share; sourced, with $root (the checkout) and $PY (the default peer python) set.

# Every PyTorch there is: Debian's (or $LOOM_PYTHON's) and, unless LOOM_PYTHON names one, the
# newest from PyPI in .venv-torch (scripts/setup-bench).
peer_pythons() {
  if [ -z "${LOOM_PYTHON:-}" ] && [ -x "$root/.venv-torch/bin/python" ]; then
    echo "$PY $root/.venv-torch/bin/python"
  else
    echo "$PY"
  fi
}
free_port() {  # a TCP port on the loopback that nothing listens on now, for DDP's rank 0
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
