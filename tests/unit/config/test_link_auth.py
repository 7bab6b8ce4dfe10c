"""Who may join the master port (config/link_auth.py): keys derived from the shared secret, the link kept on this
machine without one, and the lines that say why."""

from __future__ import annotations

import zmq

from llm_locust.config.link_auth import SECRET_ENV, LinkKeys, processes_link, refusal, secret_refusal

SECRET = "x" * 16


def test_every_holder_of_the_secret_derives_the_same_key_pairs_and_no_one_else():
    keys = LinkKeys.of(SECRET)
    assert keys == LinkKeys.of(SECRET) and keys != LinkKeys.of(SECRET + "y")
    assert zmq.curve_public(keys.server_secret) == keys.server_public != keys.client_public
    assert zmq.curve_public(keys.client_secret) == keys.client_public
    assert len(keys.server_secret) == len(keys.client_secret) == 40  # Z85 of 32 bytes


def test_without_a_secret_the_link_stays_on_this_machine():
    for host in ("127.0.0.1", "localhost", "::1"):
        assert refusal("master", host, "") is None and refusal("worker", host, "") is None
    for host in ("*", "0.0.0.0", "10.0.0.5"):
        why = refusal("master", host, "")
        assert why is not None and f"--master-bind-host {host}:" in why and f"only with {SECRET_ENV} set" in why
        assert refusal("master", host, SECRET) is None
    assert "every interface" in (refusal("master", "*", "") or "")
    why = refusal("worker", "master", "")
    assert why is not None and why.startswith("--master-host master: a worker joins") and SECRET_ENV in why
    assert refusal("worker", "master", SECRET) is None


def test_a_short_secret_is_refused_naming_its_length_only():
    why = secret_refusal("s3cr3t")
    assert why is not None and f"{SECRET_ENV} is 6 characters" in why and "s3cr3t" not in why
    assert refusal("master", "127.0.0.1", "s3cr3t") == why and secret_refusal(SECRET) is None


def test_each_processes_run_gets_its_own_port_and_secret():
    a, b = processes_link(), processes_link()
    assert a.secret != b.secret and secret_refusal(a.secret) is None and 0 < a.port < 65536
