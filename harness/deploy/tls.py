"""Throwaway TLS material for one run: a CA, one key + certificate per broker, Java keystores.

Everything is generated with `cryptography` into `<run>/tls/` and lives only as long as the run
folder: the CA key never leaves it, the keystore password is random per run and is redacted from
run records (it appears only in the brokers' generated activemq.xml and in `tls/password`, both
mode 0600).

Java 17 reads PKCS12 directly: each broker gets `<broker>.p12` (its key and chain) and every
broker shares `truststore.p12` (the CA as a trusted entry, readable by Java's PKCS12 keystore
because `serialize_java_truststore` marks it trusted). Clients verify brokers with `ca.pem`
(paho: `tls_set(ca_certs=...)`; stomp.py: `set_ssl(..., ca_certs=...)`).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_HOSTS = ("127.0.0.1", "localhost")
VALIDITY = dt.timedelta(days=2)


class TlsError(RuntimeError):
    """TLS material could not be created or read."""


@dataclass(frozen=True)
class RunTls:
    """Paths and secret of one run's TLS material."""

    dir: Path
    password: str

    @property
    def ca_cert(self) -> Path:
        return self.dir / "ca.pem"

    @property
    def truststore(self) -> Path:
        return self.dir / "truststore.p12"

    def keystore(self, broker: str) -> Path:
        return self.dir / f"{broker}.p12"

    def broker_cert(self, broker: str) -> Path:
        return self.dir / f"{broker}.pem"

    def ssl_view(self, broker: str) -> dict[str, str]:
        """What the activemq.xml template's sslContext needs for `broker`."""
        return {
            "keystore": str(self.keystore(broker)),
            "truststore": str(self.truststore),
            "password": self.password,
        }


def _write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _name(cn: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "bfh throwaway"),
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
        ]
    )


def _san(hosts: Iterable[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for h in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            names.append(x509.DNSName(h))
    return x509.SubjectAlternativeName(names)


def _serial() -> int:
    return x509.random_serial_number()


def make_ca(cn: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(key.public_key())
        .serial_number(_serial())
        .not_valid_before(now)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def make_leaf(
    cn: str,
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    hosts: Iterable[str] = DEFAULT_HOSTS,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A server+client certificate for `cn` valid for `hosts`, signed by the CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(_serial())
        .not_valid_before(now)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_san(hosts), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return key, cert


def make_run_tls(
    directory: str | Path,
    brokers: Iterable[str],
    hosts: Iterable[str] = DEFAULT_HOSTS,
    run_label: str = "run",
) -> RunTls:
    """Create a fresh CA, a keystore per broker and the shared truststore under `directory`."""
    d = Path(directory)
    try:
        d.mkdir(parents=True, exist_ok=True)
        os.chmod(d, 0o700)
    except OSError as e:
        raise TlsError(f"cannot create TLS folder {d}: {e.strerror}") from None
    password = secrets.token_urlsafe(18)
    hosts = list(hosts)
    ca_key, ca_cert = make_ca(f"bfh throwaway CA {run_label}")
    enc = serialization.BestAvailableEncryption(password.encode())
    _write(d / "ca.pem", ca_cert.public_bytes(serialization.Encoding.PEM))
    _write(
        d / "truststore.p12",
        pkcs12.serialize_java_truststore([pkcs12.PKCS12Certificate(ca_cert, b"bfh-ca")], enc),
    )
    names = list(brokers)
    for b in names:
        key, cert = make_leaf(b, ca_key, ca_cert, hosts)
        _write(d / f"{b}.pem", cert.public_bytes(serialization.Encoding.PEM))
        _write(d / f"{b}.p12", pkcs12.serialize_key_and_certificates(b.encode(), key, cert, [ca_cert], enc))
    _write(d / "password", password.encode())
    _write(d / "meta.json", json.dumps({"brokers": names, "hosts": hosts}).encode())
    return RunTls(d, password)


def load_run_tls(directory: str | Path) -> RunTls:
    d = Path(directory)
    try:
        return RunTls(d, (d / "password").read_text().strip())
    except OSError as e:
        raise TlsError(f"no TLS material in {d}: {e.strerror}") from None
