"""The TLS side of an SSL or SASL_SSL listener: an ``ssl.SSLContext`` from Kafka's PEM settings.

Keys (per listener as ``listener.name.<name>.<key>``; Kafka's names and meaning)::

    ssl.keystore.type=PEM             only PEM (JKS and PKCS12: one line saying so)
    ssl.keystore.location             a PEM file: the private key and the certificate chain
    ssl.keystore.key                  or inline: the private key (PKCS#8, PEM) ...
    ssl.keystore.certificate.chain    ... and the certificate chain (PEM)
    ssl.key.password                  the private key's password, when it is encrypted
    ssl.truststore.type=PEM           only PEM
    ssl.truststore.location           a PEM file of CA certificates that sign client certificates
    ssl.truststore.certificates       or inline PEM; neither: the system's CAs
    ssl.client.auth                   none [default] | requested | required; on a SASL_SSL
                                      listener only its listener.name.<name>. value counts (KIP-684)
    ssl.enabled.protocols             [TLSv1.2,TLSv1.3]
    ssl.cipher.suites                 TLS 1.2 suites in OpenSSL's names [OpenSSL's defaults]

Kafka's PEM rules hold: ``ssl.keystore.password`` and ``ssl.truststore.password`` are refused
with PEM, location and inline values exclude each other. Inline PEM may come folded onto one
line by the properties file's ``\\`` continuations; it is re-wrapped before OpenSSL reads it.
Every error names the key and the file, never a password or key material.
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
import tempfile
from collections.abc import Iterator
from pathlib import Path

from kafkatier.serve.security.props import ListenerProps

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
               "required": ssl.CERT_REQUIRED}  # fmt: skip
PROTOCOLS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
             "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}  # fmt: skip
_PEM = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


def tls_context(props: ListenerProps, sasl: bool) -> ssl.SSLContext:
    """The server context of one listener (module docstring); ``sasl``: a SASL_SSL listener."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols(context, props)
    _ciphers(context, props)
    _keystore(context, props)
    context.verify_mode = _client_auth(props, sasl)
    if context.verify_mode != ssl.CERT_NONE:
        _truststore(context, props)
    return context


def _pem_only(props: ListenerProps, store: str) -> None:
    kind = (props.get(f"ssl.{store}.type") or "PEM").upper()
    if kind != "PEM":
        raise props.error(f"ssl.{store}.type", f"{kind} {store}s are not supported, only "
                          f"PEM (convert: openssl pkcs12 -in {store}.p12 -nodes; keytool "
                          f"-importkeystore turns JKS into PKCS12) and ssl.{store}.type=PEM")
    if props.get(f"ssl.{store}.password") is not None:
        raise props.error(f"ssl.{store}.password", f"not allowed with PEM (Kafka's rule: "
                          f"{'only ssl.key.password' if store == 'keystore' else 'no password'}"
                          " applies)")  # fmt: skip


def _keystore(context: ssl.SSLContext, props: ListenerProps) -> None:
    _pem_only(props, "keystore")
    location, key = props.get("ssl.keystore.location"), props.get("ssl.keystore.key")
    chain = props.get("ssl.keystore.certificate.chain")
    password = props.get("ssl.key.password") or ""
    if location and (key or chain):
        raise props.error("ssl.keystore.key", "set either ssl.keystore.location or "
                          "ssl.keystore.key with ssl.keystore.certificate.chain, not both")
    if location:
        pem = _read_pem(props, "ssl.keystore.location")
        _load_chain(context, props, pem, password, location, contextlib.nullcontext(location))
        return
    if not key or not chain:
        missing = "ssl.keystore.key" if not key else "ssl.keystore.certificate.chain"
        raise props.error(missing if key or chain else "ssl.keystore.location",
                          "a TLS listener needs its certificate: ssl.keystore.location (a PEM "
                          "file with the private key and the certificate chain) or "
                          "ssl.keystore.key with ssl.keystore.certificate.chain")  # fmt: skip
    pem = _rewrap(key) + _rewrap(chain)
    _load_chain(context, props, pem, password, "inline PEM", _private_file(pem))


def _load_chain(context: ssl.SSLContext, props: ListenerProps, pem: str, password: str,
                what: str, file: contextlib.AbstractContextManager[str]) -> None:  # fmt: skip
    if "PRIVATE KEY-----" not in pem:
        raise props.error("ssl.keystore.location", f"{what}: no private key in the PEM")
    if "CERTIFICATE-----" not in pem:
        raise props.error("ssl.keystore.location", f"{what}: no certificate in the PEM")
    encrypted = "ENCRYPTED" in pem
    with file as path:
        try:  # a callable password: OpenSSL never prompts on the terminal
            context.load_cert_chain(path, password=lambda: password)
        except ssl.SSLError as exc:
            if encrypted:
                problem = ("the private key is encrypted and ssl.key.password is wrong"
                           if password else "the private key is encrypted: set ssl.key.password")
                raise props.error("ssl.key.password", f"{what}: {problem}") from None
            raise props.error("ssl.keystore.location", f"{what}: the key and certificate do "
                              f"not load ({exc.reason or exc})") from None  # fmt: skip


def _truststore(context: ssl.SSLContext, props: ListenerProps) -> None:
    _pem_only(props, "truststore")
    location = props.get("ssl.truststore.location")
    inline = props.get("ssl.truststore.certificates")
    if location and inline:
        raise props.error("ssl.truststore.certificates", "set either ssl.truststore.location "
                          "or ssl.truststore.certificates, not both")  # fmt: skip
    if not location and not inline:
        context.load_default_certs(ssl.Purpose.CLIENT_AUTH)  # Kafka: the JVM's default CAs
        return
    name = "ssl.truststore.location" if location else "ssl.truststore.certificates"
    pem = _read_pem(props, name) if location else _rewrap(inline or "")
    try:
        context.load_verify_locations(cadata=pem)
    except (ssl.SSLError, ValueError) as exc:
        raise props.error(name, f"{location or 'inline PEM'}: no CA certificate loads "
                          f"({getattr(exc, 'reason', None) or exc})") from None  # fmt: skip


def _read_pem(props: ListenerProps, name: str) -> str:
    path = Path(props.get(name) or "")
    try:
        text = path.read_text("ascii", errors="replace")
    except OSError as exc:
        raise props.error(name, f"cannot read {path}: {exc.strerror}") from None
    if "-----BEGIN " not in text:
        raise props.error(name, f"{path} is not a PEM file (JKS and PKCS12 stores are not "
                          "supported: PEM only)")  # fmt: skip
    return text


def _rewrap(text: str) -> str:
    """PEM blocks with their base64 body on 64-column lines (folded values come as one line)."""
    blocks = []
    for label, body in _PEM.findall(text):
        data = "".join(body.split())
        lines = "\n".join(data[i : i + 64] for i in range(0, len(data), 64))
        blocks.append(f"-----BEGIN {label}-----\n{lines}\n-----END {label}-----\n")
    return "".join(blocks)


@contextlib.contextmanager
def _private_file(text: str) -> Iterator[str]:
    """``text`` in a file only this user reads, deleted after use (OpenSSL loads key files)."""
    fd, name = tempfile.mkstemp(prefix="kafkatier-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        yield name
    finally:
        os.unlink(name)


def _client_auth(props: ListenerProps, sasl: bool) -> ssl.VerifyMode:
    text = props.own("ssl.client.auth") if sasl else props.get("ssl.client.auth")
    mode = CLIENT_AUTH.get((text or "none").lower())
    if mode is None:
        raise props.error("ssl.client.auth", "expected none, requested or required",
                          value=text)  # fmt: skip
    return mode


def _protocols(context: ssl.SSLContext, props: ListenerProps) -> None:
    names = [p.strip() for p in (props.get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3").split(",")
             if p.strip()]  # fmt: skip
    unknown = [n for n in names if n not in PROTOCOLS]
    if unknown or not names:
        first = unknown[0] if unknown else ""
        raise props.error("ssl.enabled.protocols", f"unknown protocol {first!r} (one or more "
                          f"of {', '.join(PROTOCOLS)})")  # fmt: skip
    versions = sorted(PROTOCOLS[n] for n in names)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]


def _ciphers(context: ssl.SSLContext, props: ListenerProps) -> None:
    suites = [s.strip() for s in (props.get("ssl.cipher.suites") or "").split(",") if s.strip()]
    if not suites:
        return
    try:
        context.set_ciphers(":".join(suites))
    except ssl.SSLError:
        raise props.error("ssl.cipher.suites", "no cipher suite matches (OpenSSL's names, "
                          "e.g. ECDHE-RSA-AES256-GCM-SHA384; TLS 1.3 suites are OpenSSL's "
                          "defaults)") from None  # fmt: skip
