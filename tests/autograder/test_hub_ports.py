"""Each server of the hub gets a port of its own, even when two start at the same moment."""

from __future__ import annotations

import asyncio
import socket

import pytest

pytest.importorskip("jupyterhub")

from autograder.jupyterhub import spawner  # noqa: E402


@pytest.fixture(autouse=True)
def no_ports_given(monkeypatch):
    monkeypatch.setattr(spawner, "_ports_given", set())


def test_a_port_another_server_holds_is_not_given_again(monkeypatch):
    # random_port binds and lets go: two servers starting at once can be told the same free port
    answers = iter([51149, 51149, 51149, 40001])
    monkeypatch.setattr(spawner, "random_port", lambda: next(answers))
    first, second = spawner.take_port(), spawner.take_port()
    assert (first, second) == (51149, 40001)


def test_a_stopped_servers_port_can_be_given_again(monkeypatch):
    answers = iter([51149, 51149])
    monkeypatch.setattr(spawner, "random_port", lambda: next(answers))
    port = spawner.take_port()
    spawner.give_back_port(port)
    assert spawner.take_port() == port


def test_a_restart_lets_go_of_its_previous_port(monkeypatch):
    answers = iter([51149, 40001, 51149])
    monkeypatch.setattr(spawner, "random_port", lambda: next(answers))
    first = spawner.take_port()
    again = spawner.take_port(previous=first)       # the same user's next server
    assert again == 40001 and spawner.take_port() == first


def test_thirty_servers_at_once_get_thirty_free_ports():
    ports = [spawner.take_port() for _ in range(30)]
    assert len(set(ports)) == 30
    for port in ports:   # nothing listens there yet: each server can bind its own
        with socket.socket() as probe:
            probe.bind(("", port))


def test_the_spawner_takes_a_port_for_every_start_and_gives_it_back_when_it_fails(monkeypatch):
    answers = iter([51149, 40001])
    monkeypatch.setattr(spawner, "random_port", lambda: next(answers))

    class Failing(spawner.CourseSpawner):
        async def _start(self):
            raise RuntimeError("no server")

    failing = Failing()
    with pytest.raises(RuntimeError, match="no server"):
        asyncio.run(failing.start())
    assert failing.port == 51149 and 51149 not in spawner._ports_given
