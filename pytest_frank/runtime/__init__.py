"""The runtime that probes and judges: an endpoint under test (`target`), the session that
probes the fleet (`session`, `probes`, `identify`), one request path for generation (`chat`),
what a probe saw (`observation`) and the verdict vocabulary every judge speaks (`verdict`).
The engine drivers, GGUF reading, memory models, local servers and serve files sit beside it in
the same layer (`drivers`, `gguf`, `vram`, `local`, `serve`)."""
