"""A real inference engine for the engine test tier and `make demo-engine`: llama.cpp's server with
SmolLM2-135M, built from the package registries into a cache outside the work tree (build.sh); and a real
speech-to-text server, faster-whisper-server with whisper-base, installed into the same cache (whisper.py)."""
