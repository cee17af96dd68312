"""Self-signed webhook certificates (used when cert-manager is not installed).

Pure functions over PEM strings: a CA the agent keeps, and serving certificates
for the webhook Services signed by it. Both are renewed well before they expire.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

CA_LIFETIME = dt.timedelta(days=365 * 2)
LEAF_LIFETIME = dt.timedelta(days=180)
RENEW_BEFORE = dt.timedelta(days=30)


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, PEM encoded."""

    cert_pem: str
    key_pem: str


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def new_ca(
    now: dt.datetime,
    common_name: str = "model-serving-addon webhook CA",
    lifetime: dt.timedelta = CA_LIFETIME,
) -> KeyPair:
    """A new self-signed CA valid from ``now`` for ``lifetime``; it signs leaves only."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + lifetime)
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
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM).decode(), _key_pem(key))


def new_leaf(ca: KeyPair, dns_names: Sequence[str], now: dt.datetime) -> KeyPair:
    """A serving certificate for ``dns_names`` signed by ``ca``."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.encode())
    ca_key = serialization.load_pem_private_key(ca.key_pem.encode(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[0])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(min(now + LEAF_LIFETIME, ca_cert.not_valid_after_utc))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names]), False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM).decode(), _key_pem(key))


def needs_renewal(cert_pem: str | None, now: dt.datetime) -> bool:
    """Whether a certificate is missing, unreadable or within RENEW_BEFORE of expiry."""
    if not cert_pem:
        return True
    try:
        cert = x509.load_pem_x509_certificate(cert_pem.encode())
    except ValueError:
        return True
    return cert.not_valid_after_utc - now < RENEW_BEFORE


def leaf_valid(
    leaf_pem: str | None, ca: KeyPair, dns_names: Sequence[str], now: dt.datetime
) -> bool:
    """Whether ``leaf_pem`` is signed by ``ca``, covers ``dns_names`` and is not due for renewal."""
    if leaf_pem is None or needs_renewal(leaf_pem, now):
        return False
    leaf = x509.load_pem_x509_certificate(leaf_pem.encode())
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.encode())
    if leaf.issuer != ca_cert.subject:
        return False
    try:
        leaf.verify_directly_issued_by(ca_cert)
        san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, TypeError, x509.ExtensionNotFound, Exception):
        return False
    return set(san.get_values_for_type(x509.DNSName)) == set(dns_names)
