"""The engine tier: the suite's checks against a real llama.cpp server (`make test-engine`)."""
