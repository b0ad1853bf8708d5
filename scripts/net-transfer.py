#!/usr/bin/env python3
"""Times one TCP transfer between two fake nodes of scripts/fake-cluster-net.sh:
what a link of the emulated network carries.

  ip netns exec NET-node2 scripts/net-transfer.py receive ADDRESS BYTES &
  ip netns exec NET-node1 scripts/net-transfer.py send ADDRESS BYTES

The receiver listens on ADDRESS port 5201 and answers once BYTES have
arrived; the sender connects (retrying while the receiver starts), sends
BYTES and prints the seconds from its first byte to the answer.
"""
import socket
import sys
import time

role, address, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
if role == "receive":
    server = socket.create_server((address, 5201))
    connection, _ = server.accept()
    received = 0
    while received < size:
        chunk = connection.recv(1 << 20)
        if not chunk:
            break
        received += len(chunk)
    connection.sendall(b"done")
else:
    for attempt in range(100):
        try:
            connection = socket.create_connection((address, 5201))
            break
        except ConnectionRefusedError:
            time.sleep(0.05)
    start = time.perf_counter()
    connection.sendall(bytes(size))
    connection.recv(4)
    print(f"{time.perf_counter() - start:.4f}")
