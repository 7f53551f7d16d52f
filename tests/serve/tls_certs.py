"""Throwaway PEM files for the TLS tests: a CA, a server certificate for 127.0.0.1 and
localhost (its key plain, and PKCS#8-encrypted), a client certificate the CA signed, and one a
stranger CA signed. EC P-256 keys: generated in milliseconds."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from ipaddress import IPv4Address
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

KEY_PASSWORD = "key-pass-0451"


@dataclass(frozen=True)
class Certs:
    ca: Path  # the CA certificate (clients' and the server's truststore)
    server: Path  # the server's key and certificate chain, one PEM file
    server_encrypted: Path  # the same with the key encrypted with KEY_PASSWORD
    server_key: Path  # the key alone and the certificate alone (inline-PEM tests)
    server_cert: Path
    client_cert: Path
    client_key: Path
    stranger_cert: Path  # a client certificate the CA did not sign
    stranger_key: Path


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _cert(subject: str, key: ec.EllipticCurvePrivateKey, issuer: str,
          issuer_key: ec.EllipticCurvePrivateKey, *, ca: bool = False,
          server: bool = False) -> x509.Certificate:  # fmt: skip
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer))
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )  # fmt: skip
    if server:
        names = [x509.DNSName("localhost"), x509.IPAddress(IPv4Address("127.0.0.1"))]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    if not ca:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _key_pem(key: ec.EllipticCurvePrivateKey, password: str | None = None) -> bytes:
    encryption: serialization.KeySerializationEncryption = serialization.NoEncryption()
    if password is not None:
        encryption = serialization.BestAvailableEncryption(password.encode())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             encryption)  # fmt: skip


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def make_certs(folder: Path) -> Certs:
    folder.mkdir(parents=True, exist_ok=True)
    keys = {n: ec.generate_private_key(ec.SECP256R1()) for n in
            ("ca", "server", "client", "stranger")}  # fmt: skip
    ca = _cert("kafkatier test CA", keys["ca"], "kafkatier test CA", keys["ca"], ca=True)
    server = _cert("localhost", keys["server"], "kafkatier test CA", keys["ca"], server=True)
    client = _cert("alice", keys["client"], "kafkatier test CA", keys["ca"])
    stranger = _cert("mallory", keys["stranger"], "mallory", keys["stranger"])
    files = {
        "ca": _pem(ca), "server": _key_pem(keys["server"]) + _pem(server) + _pem(ca),
        "server_encrypted": _key_pem(keys["server"], KEY_PASSWORD) + _pem(server) + _pem(ca),
        "server_key": _key_pem(keys["server"]), "server_cert": _pem(server) + _pem(ca),
        "client_cert": _pem(client), "client_key": _key_pem(keys["client"]),
        "stranger_cert": _pem(stranger), "stranger_key": _key_pem(keys["stranger"]),
    }  # fmt: skip
    for name, data in files.items():
        (folder / f"{name}.pem").write_bytes(data)
    return Certs(**{name: folder / f"{name}.pem" for name in files})
