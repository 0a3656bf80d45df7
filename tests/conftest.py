import pytest
import yaml


@pytest.fixture
def run_fleet(pytester, monkeypatch):
    """Write a fleet file and run pytest on it in-process; returns pytester's RunResult."""

    def run(fleet, *args, env=None):
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        path = pytester.path / "fleet.yaml"
        path.write_text(fleet if isinstance(fleet, str) else yaml.safe_dump(fleet))
        return pytester.runpytest("--endpoints", str(path), "-p", "no:cacheprovider", "-rA",
                                  "-W", "ignore::pytest.PytestAssertRewriteWarning",
                                  "-p", "no:hypothesispytest", *args)

    return run


from llama import llama  # noqa: E402,F401  (the real llama.cpp server factory fixture)
