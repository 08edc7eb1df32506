"""``hooks serve --certfile/--keyfile``: the webhook receiver over HTTPS (stdlib ssl) accepts
signed events from a client that trusts its certificate, refuses plain HTTP on the same port
without stalling, and bad TLS files are one-line errors naming the options."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

import pytest
import requests
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from pipeline_steps.cli import main
from registry_hooks.dispatch import Dispatcher
from registry_hooks.receiver import WebhookReceiver, tls_context
from tests.test_registry_events import SECRET, Recorder, alias_body, signed_headers


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 / localhost and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@pytest.fixture
def tls_receiver(tmp_path: Path):
    cert, key = self_signed(tmp_path)
    recorder = Recorder()
    dispatcher = Dispatcher(recorder, lambda n, v: True, alias="candidate", background=True)
    server = WebhookReceiver(dispatcher, SECRET, quiet=True, certfile=cert,
                             keyfile=key).start()
    yield server, recorder, cert
    server.stop()


def test_https_receiver_accepts_signed_events(tls_receiver) -> None:
    server, recorder, cert = tls_receiver
    assert server.url.startswith("https://127.0.0.1:")
    body = alias_body(version="3")
    response = requests.post(server.url, data=body, headers=signed_headers(body), timeout=5,
                             verify=str(cert))
    assert (response.status_code, response.json()["status"]) == (202, "queued")
    server.dispatcher.drain()
    assert [(e.name, e.version) for e in recorder.events] == [("credit", "3")]


def test_plain_http_is_refused_and_the_server_keeps_serving(tls_receiver) -> None:
    server, recorder, cert = tls_receiver
    body = alias_body(version="4")
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.post(server.url.replace("https://", "http://"), data=body,
                      headers=signed_headers(body), timeout=5)
    with pytest.raises(requests.exceptions.SSLError):
        requests.post(server.url, data=body, headers=signed_headers(body), timeout=5)
    response = requests.get(server.url.replace("/webhook", "/health"), timeout=5,
                            verify=str(cert))
    assert response.json() == {"status": "ok"}
    server.dispatcher.drain()
    assert recorder.events == []


def test_unusable_tls_files_name_the_file(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    with pytest.raises(ValueError, match="TLS file not found"):
        tls_context(tmp_path / "missing.pem", key)
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate")
    with pytest.raises(ValueError, match="not a usable PEM certificate"):
        tls_context(garbage)
    other = tmp_path / "other"
    other.mkdir()
    _, other_key = self_signed(other)
    with pytest.raises(ValueError, match="not a usable PEM certificate and private key"):
        tls_context(cert, other_key)


@pytest.mark.parametrize(("options", "message"), [
    (["--keyfile", "key.pem"], "--keyfile needs --certfile"),
    (["--certfile", "missing.pem"], "--certfile/--keyfile: TLS file not found"),
])
def test_cli_tls_options(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                         monkeypatch: pytest.MonkeyPatch, options: list[str],
                         message: str) -> None:
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "tracking": {"tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}"},
        "model": {"uri": "models:/credit@candidate"},
        "audits": [{"kind": "monotonicity", "feature": "x", "min_probability": 0.5}],
    }))
    code = main(["hooks", "serve", "--config", str(config), "--port", "0", "--secret", "s",
                 *options])
    assert code == 2 and message in capsys.readouterr().err
