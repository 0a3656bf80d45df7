"""Fleet dicts for tests."""


def one_endpoint(url, engine="llamacpp", **extra):
    """A fleet of one endpoint named `ep`."""
    return {"endpoints": {"ep": {"url": url, "engine": engine, **extra}}}
