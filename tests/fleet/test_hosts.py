"""Whether a URL's host is this machine (pytest_frank.base.hosts): loopback in every spelling, this
machine's own names and addresses, and hosts elsewhere, decided quickly without contacting them."""

import socket
import time

import pytest

from pytest_frank.base.hosts import host_of, is_local, server_of, shared_servers

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.1.1", "localhost", "LOCALHOST.", "::1",
                                  "[::1]", "::ffff:127.0.0.1", "0.0.0.0", "api.localhost"])
def test_loopback_in_every_spelling_is_here(host):
    assert is_local(host)


def test_this_machines_own_names_and_addresses_are_here():
    name = socket.gethostname()
    assert is_local(name) and is_local(name.upper())
    for info in socket.getaddrinfo(name, None):
        assert is_local(info[4][0]), info[4][0]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("10.255.255.255", 9))  # the address this machine sends from; nothing is sent
        assert is_local(s.getsockname()[0])


@pytest.mark.parametrize("host", ["10.255.255.1", "192.0.2.77", "fd12::7", "gpu-box.invalid"])
def test_other_hosts_are_elsewhere_and_decided_quickly(host):
    started = time.monotonic()
    assert not is_local(host)
    assert time.monotonic() - started < 3  # a lookup is bounded; nothing is contacted


def test_host_of_a_url():
    assert host_of("http://10.0.0.5:8000/v1") == "10.0.0.5"
    assert host_of("https://[fd12::7]:8443") == "fd12::7"
    assert host_of("http://GPU-Box:8080") == "gpu-box"
    assert host_of(None) == ""  # a launched server runs here


@pytest.mark.parametrize("url, server", [
    ("http://127.0.0.1:8080/v1", "127.0.0.1:8080"),
    ("http://localhost:8080", "127.0.0.1:8080"),
    ("https://GPU1.example./v1", "gpu1.example:443"),
    ("http://gpu1/openai/v1", "gpu1:80"),
    ("http://[::1]:9000/v1", "[::1]:9000"),
    (None, ""),
    ("", ""),
])
def test_the_server_a_url_reaches(url, server):
    assert server_of(url) == server


def test_entries_that_reach_one_server_are_named_together():
    urls = {"chat": "http://127.0.0.1:8080/v1", "messages": "http://localhost:8080",
            "other": "http://127.0.0.1:8081/v1", "gpu": "http://gpu1:80/v1",
            "gpu-replica": "http://gpu1/v1"}
    assert shared_servers(urls) == {"127.0.0.1:8080": ["chat", "messages"],
                                    "gpu1:80": ["gpu", "gpu-replica"]}
    assert shared_servers({"a": "http://127.0.0.1:1", "b": "http://127.0.0.1:2"}) == {}
