"""The ingress waits for Caddy's previous socket to close: the count it waits on."""

from __future__ import annotations

from testbed.dataplane.ingress import listening_sockets

TABLE = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:6F42 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1
   1: 0100007F:6F42 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1
   2: 0100007F:6F42 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 3 1
   3: 00000000:6F42 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4 1
   4: 0100007F:6F43 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5 1
"""


def test_only_sockets_listening_on_the_loopback_port_count() -> None:
    # Two listening on 127.0.0.1:28482 (a reload's old and new socket); an established
    # connection, another address and another port do not count.
    assert listening_sockets(28482, TABLE) == 2
    assert listening_sockets(28483, TABLE) == 1
    assert listening_sockets(80, TABLE) == 0
    assert listening_sockets(28482, TABLE.splitlines()[0]) == 0
