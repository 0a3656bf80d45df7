"""Local serving: a llama.cpp server started in this process (launch), its log (llama_log), and
the tiny deterministic model it serves in self-tests (selftest_model)."""
