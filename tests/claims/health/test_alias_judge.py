"""The alias claim's advice, by hand: which served id a fleet value is a slip of, and every fix
naming a launch setting spelt as the launcher the endpoint was started with takes it."""

import pytest

from pytest_frank.claims.alias import alias_fix, close_id
from pytest_frank.claims.params import drafted_logprobs_fix
from pytest_frank.claims.perf import slow_cpu_hint
from pytest_frank.claims.slots import more_context_fix
from pytest_frank.drivers import LlamaCppDriver
from pytest_frank.local.stay_up import FRANK_LAUNCH, spec_of
from pytest_frank.outcome.verdict import FLEET, SERVER, render

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("wanted, served, near", [
    ("smoll", ["smol"], ("smol", "is 1 edit away from it")),
    ("smlo", ["smol", "other-model"], ("smol", "is 1 edit away from it")),
    ("Qwen-Large", ["qwen-large"], ("qwen-large", "differs from it only in case")),
    ("qwen_large", ["qwen-large"], ("qwen-large", "differs from it only in case or separators")),
    ("llama3-instrcut", ["llama3-instruct"], ("llama3-instruct", "is 1 edit away from it")),
    # another model, not a slip: its size or version, or a name that is not near
    ("qwen3-4b", ["qwen3-8b"], None),
    ("frank-default-small", ["frank-default-large"], None),
    ("tiny-chat", ["smol"], None),
    # two as near: which one was meant is not shown
    ("frank-c", ["frank-a", "frank-b"], None),
])
def test_a_slip_of_a_served_id(wanted, served, near):
    assert close_id(wanted, served) == near


def test_the_alias_fix_in_each_launchers_spelling():
    fix = alias_fix(LlamaCppDriver(), "tiny", ["smol"])
    assert render(fix, SERVER) == ("start llama-server with --alias smol,tiny (the names served "
                                   "now kept beside it)")
    assert render(fix, FLEET) == ("set in fleet.yaml launch.alias: [smol, tiny] (the names "
                                  "served now kept beside it)")
    assert render(fix, FRANK_LAUNCH) == ("start frank launch with --alias smol --alias tiny (the "
                                         "names served now kept beside it)")


def test_frank_launch_takes_what_its_spelling_says():
    """Each name its own --alias, or llama-server's comma list; any other key through --set."""
    import argparse

    args = argparse.Namespace(model="selftest", port=0, host="127.0.0.1",
                              alias=["smol", "tiny,chat"], ctx_size=None, parallel=4,
                              threads=None, set=["kv_unified=true"], api_key_env=None)
    assert spec_of(args) == {"model": "selftest", "port": 0, "host": "127.0.0.1",
                             "alias": ["smol", "tiny", "chat"], "parallel": 4, "kv_unified": True}


def test_every_launch_setting_a_fix_names_follows_the_launcher():
    driver = LlamaCppDriver()
    slots = more_context_fix(driver, 4096, 4)
    assert "--parallel 4" in render(slots, SERVER) and "--kv-unified" in render(slots, SERVER)
    said = render(slots, FRANK_LAUNCH)
    assert "--parallel 4" in said and "--set kv_unified=true" in said, said
    assert "--kv-unified" not in said and "--ctx-size 16384" in said
    assert "launch.kv_unified: true" in render(slots, FLEET)
    threads = slow_cpu_hint(driver)
    assert render(threads, FLEET).startswith("set launch.threads to the physical cores")
    assert render(threads, FRANK_LAUNCH).startswith("set --threads to the physical cores")
    drafted = render(drafted_logprobs_fix(driver), FRANK_LAUNCH)
    assert "(without --set draft_model or --set spec_type)" in drafted, drafted
