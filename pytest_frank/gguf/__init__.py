"""GGUF model files: the header's bytes (reader) and the architecture they describe (summary)."""
