"""Local serving: a llama.cpp server started in this process or a child of its own (launch), its
log (llama_log), and the tiny deterministic model it serves in self-tests (selftest_model)."""
