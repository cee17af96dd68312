"""Who holds a listening socket (testbed.support.endpoint.listening_pids), read from /proc."""

from __future__ import annotations

import os
import socket

from testbed.support.endpoint import listening_pids


def test_the_process_holding_a_listening_socket_is_found_until_it_closes_it() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    port = server.getsockname()[1]
    listen = f"127.0.0.1:{port}"
    assert listening_pids(listen) == set()  # bound, not listening
    server.listen()
    assert listening_pids(listen) == {os.getpid()}
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = server.accept()
    server.close()
    assert listening_pids(listen) == set()  # open connections are not listeners
    accepted.close()
    client.close()
