# expect: CRASH import guards-off
"""Escape attempt: reach a service of the host on its loopback (a local model server, a
database, the metadata endpoint's proxy).

The listening TCP sockets are read from /proc/net/tcp and each is connected to. The worker has
its own network namespace with only its own empty loopback, so there is none to reach: CRASH at
import. A connection made makes kernel_fn return zeros (FAIL in smoke).
"""

import socket

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "reduce"
LISTEN = "0A"


def _listeners() -> list[int]:
    ports = []
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            local, _, state = line.split()[1:4]
            address, port = local.split(":")
            if state == LISTEN and address in ("0100007F", "00000000"):
                ports.append(int(port, 16))
    return ports


def _connect() -> int:
    for port in _listeners():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            return port
        except OSError:
            continue
    raise ConnectionRefusedError("no service of the host reachable on 127.0.0.1")


PORT = _connect()


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
