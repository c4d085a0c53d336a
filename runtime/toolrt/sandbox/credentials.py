"""Credentials that never enter the sandbox: the host's `sandbox.credentials` list.

A `deny` entry's variable is absent from every sandboxed process's environment, and its file reads as
empty there (masked in the process's mount namespace, as the files the `read` rules deny). A `mask` entry's
variable holds a placeholder there (random, per toolrt process); toolrt's proxy puts the real value in
place of the placeholder only in the one declared header of requests to the one declared host, over
TLS it intercepts with a per-run certificate authority (made with `cryptography`) that the sandbox
trusts through the usual variables; a response carrying the real value has it starred out. Anywhere
else (the URL, the body, another header, another host) the placeholder stays what it is. A `mask`
entry's file reads as its placeholder there (a read-only file of toolrt's bound over it), and the
proxy puts the file's content (without its trailing newline) in its place the same way.
"""

from __future__ import annotations

import datetime
import os
import secrets
import tempfile
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .masks import remove_at_exit

if TYPE_CHECKING:  # imported where a proxy runs: a build without masked credentials never loads ssl
    import ssl

__all__ = ["Credential", "Masked", "authority", "masked_files", "sandbox_environment"]


@dataclass(frozen=True, slots=True)
class Credential:
    """One entry of the host's `sandbox.credentials`."""

    env: str
    action: Literal["deny", "mask"] = "deny"
    host: str = ""
    """`mask`: the one host the real value is sent to."""
    header: str = "Authorization"
    """`mask`: the one request header it is put in."""
    file: str = ""
    """A file (absolute, resolved; `env` is then empty) that reads as empty in the sandbox (`deny`), or as
    a placeholder the proxy replaces with its content (`mask`)."""


@dataclass(frozen=True, slots=True)
class Masked:
    """A masked credential of one process: its placeholder and real value (held by toolrt only)."""

    host: str
    header: str
    placeholder: str
    value: str


_placeholders: dict[tuple[str, str], str] = {}
_lock = threading.Lock()


_file_placeholders: dict[tuple[str, str], str] = {}
_placeholder_files: dict[str, tuple[str, Masked]] = {}
"""A placeholder file's path → (its content, the mask of the credential file it stands for)."""


def masked_files(credentials: Iterable[Credential]) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The credential files to hide in a process's mount namespace (those that are regular files now):
    all of them, and (file, its placeholder file) for each `mask` one, bound over it instead of the
    empty file. A masked file is read now, at each process's start (a changed file gets a new
    placeholder); one whose content is no single line of UTF-8 text a header can carry, or that has no
    declared host, reads as empty, as a denied one does."""
    files: list[str] = []
    sources: list[tuple[str, str]] = []
    for credential in credentials:
        path = credential.file
        if not path or not os.path.isfile(path):
            continue
        files.append(path)
        value = _file_value(path) if credential.action == "mask" and credential.host else ""
        if value:
            sources.append((path, _placeholder_file(credential, value)))
    return tuple(dict.fromkeys(files)), tuple(sources)


def _file_value(path: str) -> str:
    """The file's content without its trailing newline; "" when it cannot go in a header."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(16385)
        text = data.decode()
    except (OSError, UnicodeDecodeError):
        return ""
    text = text.removesuffix("\n").removesuffix("\r")
    if len(data) > 16384 or any(c in text for c in "\r\n\0"):
        return ""
    return text


def _placeholder_file(credential: Credential, value: str) -> str:
    """A read-only file of this process holding the placeholder of (`credential.file`, `value`), written
    anew (in a new directory) when the one made before is gone or changed."""
    with _lock:
        placeholder = _file_placeholders.setdefault(
            (credential.file, value), f"toolrt-masked-file-{secrets.token_hex(16)}"
        )
        mask = Masked(credential.host.lower().rstrip("."), credential.header, placeholder, value)
        content = placeholder + "\n"
        for path, (held, kept) in _placeholder_files.items():
            if kept == mask and _holds(path, held):
                return path
        directory = tempfile.mkdtemp(prefix="toolrt-credential-")
        path = os.path.join(directory, "placeholder")
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444), "w") as handle:
            handle.write(content)
        os.chmod(directory, 0o555)
        remove_at_exit(directory)
        _placeholder_files[path] = (content, mask)
        return path


def _holds(path: str, content: str) -> bool:
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW)) as handle:
            return handle.read(len(content) + 1) == content
    except OSError:
        return False


def sandbox_environment(
    env: Mapping[str, str],
    credentials: tuple[Credential, ...],
    host_env: Mapping[str, str] | None = None,
    files: tuple[tuple[str, str], ...] = (),
) -> tuple[dict[str, str], tuple[Masked, ...]]:
    """`env` without the denied variables and with each masked one's placeholder (when the host has the
    variable); and the masks the proxy applies, with those of the masked `files` ((file, placeholder
    file), see `masked_files`). With masks, the variables that make programs trust the proxy's
    authority are set too."""
    host_env = os.environ if host_env is None else host_env
    found = dict(env)
    with _lock:
        masked = [_placeholder_files[source][1] for _, source in files if source in _placeholder_files]
    for credential in credentials:
        if not credential.env:
            continue
        found.pop(credential.env, None)
        value = host_env.get(credential.env)
        if credential.action != "mask" or not value or not credential.host:
            continue
        with _lock:
            placeholder = _placeholders.setdefault(
                (credential.env, value), f"toolrt-masked-{credential.env.lower()}-{secrets.token_hex(16)}"
            )
        found[credential.env] = placeholder
        masked.append(Masked(credential.host.lower().rstrip("."), credential.header, placeholder, value))
    if masked:
        bundle, ca = authority().files()
        for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "GIT_SSL_CAINFO", "CURL_CA_BUNDLE"):
            found[name] = bundle
        found["NODE_EXTRA_CA_CERTS"] = ca
    return found, tuple(masked)


class _Authority:
    """The per-run certificate authority: made on first use, its key never leaves this process."""

    def __init__(self) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self._x509, self._hashes, self._ec, self._oid = x509, hashes, ec, NameOID
        now = datetime.datetime.now(datetime.timezone.utc)
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"toolrt proxy CA {os.getpid()}")])
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(self.name)
            .issuer_name(self.name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=7))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        self._pem = self.certificate.public_bytes(serialization.Encoding.PEM)
        self._serialization = serialization
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._files: tuple[str, str] | None = None
        self._stamps: tuple[tuple[int, int, int], ...] = ()

    def files(self) -> tuple[str, str]:
        """(a bundle of the system's authorities and this one, this one alone), as readable files.

        They lie in a temp directory, which sandboxed processes may write: a process that changed them
        (an authority of its own added, the system's removed) would change what every later process
        trusts. So each call checks them (one `stat` each: inode, size and change time, which no
        process can set back) and writes them anew, in a new directory, when either changed."""
        with _lock:
            if self._files is None or _stamps(self._files) != self._stamps:
                import ssl

                system = ssl.get_default_verify_paths().openssl_cafile
                try:
                    with open(system, "rb") as handle:
                        trusted = handle.read()
                except OSError:
                    trusted = b""
                directory = tempfile.mkdtemp(prefix="toolrt-proxy-ca-")
                os.chmod(directory, 0o755)
                ca = os.path.join(directory, "ca.pem")
                bundle = os.path.join(directory, "bundle.pem")
                for path, data in ((ca, self._pem), (bundle, trusted.rstrip() + b"\n" + self._pem)):
                    with open(path, "wb") as handle:
                        handle.write(data)
                    os.chmod(path, 0o644)
                self._files = (bundle, ca)
                self._stamps = _stamps(self._files)
            return self._files

    def server_context(self, host: str) -> ssl.SSLContext:
        """A TLS server context presenting a certificate for `host` this authority signed."""
        with _lock:
            context = self._contexts.get(host)
            if context is not None:
                return context
            x509, hashes = self._x509, self._hashes
            now = datetime.datetime.now(datetime.timezone.utc)
            key = self._ec.generate_private_key(self._ec.SECP256R1())
            leaf = (
                x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(self._oid.COMMON_NAME, host)]))
                .issuer_name(self.name)
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(hours=1))
                .not_valid_after(now + datetime.timedelta(days=7))
                .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
                .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                .add_extension(
                    x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False
                )
                .sign(self.key, hashes.SHA256())
            )
            encoding, formats = self._serialization.Encoding.PEM, self._serialization.PrivateFormat
            chain = leaf.public_bytes(encoding) + self._pem
            secret = key.private_bytes(encoding, formats.PKCS8, self._serialization.NoEncryption())
            with tempfile.TemporaryDirectory() as directory:  # ssl loads a chain from files only
                chain_path, key_path = os.path.join(directory, "c.pem"), os.path.join(directory, "k.pem")
                with open(os.open(chain_path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as handle:
                    handle.write(chain)
                with open(os.open(key_path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as handle:
                    handle.write(secret)
                import ssl

                context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                context.load_cert_chain(chain_path, key_path)
            context.set_alpn_protocols(["http/1.1"])
            self._contexts[host] = context
            return context


def _stamps(paths: tuple[str, ...]) -> tuple[tuple[int, int, int], ...]:
    try:
        found = [os.stat(path) for path in paths]
    except OSError:
        return ()
    return tuple((info.st_ino, info.st_size, info.st_ctime_ns) for info in found)


_authority: _Authority | None = None


def authority() -> _Authority:
    global _authority
    with _lock:
        if _authority is None:
            _authority = _Authority()
        return _authority
