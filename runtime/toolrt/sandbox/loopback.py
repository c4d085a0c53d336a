"""The sandbox side of the network proxy: a listener on 127.0.0.1 inside a process's own network namespace.

Called in the thread or forked child that has just unshared a network namespace for one process
(standard library only: the fork server imports it as a top-level module). The loopback device is
brought up and a TCP listener is made there; its descriptor goes to toolrt, whose proxy (see `proxy`)
accepts the process's connections from it. The namespace has no other device and no route: a program
that ignores the proxy variables reaches nothing.
"""

from __future__ import annotations

import fcntl
import socket
import struct

__all__ = ["PROXY_PORT", "proxy_environment", "proxy_listener"]

PROXY_PORT = 3128
"""The proxy's port inside each process's namespace (its own: nothing else listens there)."""
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1


def proxy_listener() -> int:
    """Bring up `lo` in the caller's (fresh) network namespace and return a close-on-exec descriptor
    listening on 127.0.0.1:`PROXY_PORT` there."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as control:
        fcntl.ioctl(control.fileno(), _SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", _IFF_UP))
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.bind(("127.0.0.1", PROXY_PORT))
        listener.listen(128)
    except BaseException:
        listener.close()
        raise
    return listener.detach()


def proxy_environment(env: dict[str, str]) -> dict[str, str]:
    """`env` with every proxy variable pointing at the listener (both cases: programs read either) and no
    exemption (`NO_PROXY`: an exempt host would have no route)."""
    url = f"http://127.0.0.1:{PROXY_PORT}"
    found = {k: v for k, v in env.items() if k.lower() != "no_proxy"}
    for name, value in (("http_proxy", url), ("https_proxy", url), ("all_proxy", f"socks5h://127.0.0.1:{PROXY_PORT}")):
        found[name] = found[name.upper()] = value
    return found
