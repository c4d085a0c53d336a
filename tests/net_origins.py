"""Local origin servers for the network proxy tests: HTTP and HTTPS on loopback, each counting the
connections it accepted (a refused destination's count must stay 0), and a certificate authority of the
test's own (made with `cryptography`) for the HTTPS ones."""

from __future__ import annotations

import datetime
import functools
import gzip
import http.server
import re
import socket
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Authority:
    """A CA file and a server certificate it signed for `names`."""

    ca: Path
    cert: Path
    key: Path


def make_authority(directory: Path, names: tuple[str, ...]) -> Authority:
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "toolrt test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    found = Authority(directory / "ca.pem", directory / "server.pem", directory / "server.key")
    found.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    found.cert.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    found.key.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return found


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.startswith("/echo"):
            body = f"host={self.headers.get('Host')} auth={self.headers.get('Authorization')}".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()


class Origin(http.server.ThreadingHTTPServer):
    """Serves `directory` (and `/echo`, which answers with the request's Host) on `address`, over TLS with
    `tls`; counts every connection accepted."""

    daemon_threads = True

    def __init__(self, directory: Path, address: str = "127.0.0.1", tls: Authority | None = None) -> None:
        super().__init__((address, 0), functools.partial(_Quiet, directory=str(directory)))
        self.accepted = 0
        self.context: ssl.SSLContext | None = None
        if tls is not None:
            self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.context.load_cert_chain(tls.cert, tls.key)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def get_request(self) -> tuple[socket.socket, Any]:
        connection, address = super().get_request()
        self.accepted += 1
        if self.context is not None:
            connection.settimeout(10)
            connection = self.context.wrap_socket(connection, server_side=True)
        return connection, address

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _Reflect(http.server.BaseHTTPRequestHandler):
    server: Reflecting

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        seen = {k.lower(): v for k, v in self.headers.items()}
        seen.update(path=self.path, body=body)
        self.server.seen.append(seen)
        if self.path.startswith(("/reflect", "/gzip")):  # a reply that carries the credential back
            text = str(self.headers.get("Authorization"))
        else:
            text = f"host={self.headers.get('Host')} auth={self.headers.get('Authorization')}"
        data = text.encode()
        wanted = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range") or "")
        if wanted:  # as servers that honour ranges on any body do
            data = data[int(wanted[1]) : int(wanted[2]) + 1]
        self.send_response(206 if wanted else 200)
        if "gzip" in (self.headers.get("Accept-Encoding") or "") or self.path.startswith("/gzip"):  # even unasked
            data = gzip.compress(data)
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer


class Reflecting(Origin):
    """An origin that records every request's headers, path and body (`seen`) and echoes them back."""

    def __init__(self, directory: Path, tls: Authority | None = None) -> None:
        self.seen: list[dict[str, str]] = []
        http.server.ThreadingHTTPServer.__init__(self, ("127.0.0.1", 0), _Reflect)
        self.accepted = 0
        self.context = None
        if tls is not None:
            self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.context.load_cert_chain(tls.cert, tls.key)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()
