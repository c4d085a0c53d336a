"""webfetch attacks: every IPv4 spelling `inet_aton` accepts, IPv6 forms that embed an IPv4 address,
and a redirect to a host *name* that resolves inside the network."""

from __future__ import annotations

import socket

import anyio
import httpx2
import pytest

from toolrt.builtin.webfetch import _refuse_private_redirect, private_address
from toolrt.errors import ToolFailure


@pytest.mark.parametrize(
    "host",
    [
        "127.1",  # inet_aton's short forms
        "0x7f.1",
        "2130706433",  # one 32-bit number
        "0177.0.0.1",  # octal
        "0x7f000001",
        "10.1",
        "0xa9.0xfe.0xa9.0xfe",  # 169.254.169.254, the cloud metadata service
        "[::ffff:127.0.0.1]",  # IPv4-mapped
        "[::ffff:7f00:1]",
        "[64:ff9b::7f00:1]",  # NAT64 well-known prefix around 127.0.0.1
        "[64:ff9b:1::a00:1]",  # NAT64 local-use prefix
        "[2002:7f00:1::]",  # 6to4 around 127.0.0.1
        "[2002:a9fe:a9fe::1]",  # 6to4 around the metadata service
    ],
)
def test_every_spelling_of_an_inside_address_is_private(host: str) -> None:
    assert private_address(host)


@pytest.mark.parametrize("host", ["example.com", "8.8.8.8", "134744072", "[2606:4700::1111]", "[2002:808:808::]"])
def test_public_addresses_stay_public(host: str) -> None:
    assert not private_address(host)


def test_a_redirect_to_a_name_resolving_inside_the_network_is_not_followed(monkeypatch: pytest.MonkeyPatch) -> None:
    real = socket.getaddrinfo

    def fake(host: str | bytes, *args: object, **kwargs: object) -> object:
        if host in ("innocent.example.com", b"innocent.example.com"):
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 80))]
        return real(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    check = _refuse_private_redirect("https://public.example.com/start")
    with pytest.raises(
        ToolFailure, match=r"redirected to http://innocent\.example\.com/admin, which resolves to 127\.0\.0\.1"
    ):
        anyio.run(check, httpx2.Request("GET", "http://innocent.example.com/admin"))
