"""GPU memory: what a model needs (memory, plan), what a GPU reports (sources), and
`frank preflight`, which sizes a deployment before any server starts."""
