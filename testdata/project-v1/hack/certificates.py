"""A CA and a serving certificate it signs, made with openssl, for the webhook servers that
hack/'s scripts run: e2e_webhooks.py (the emulated API server's calls) and run_webhooks.py (a
cluster's calls to this machine)."""

from __future__ import annotations

import pathlib
import shutil
import subprocess


def require(tool: str, needed_by: str) -> None:
    if shutil.which(tool) is None:
        raise SystemExit(f"error: `{tool}` is not on the PATH; {needed_by} needs it\n"
                         f"help: install {tool} (for instance from your distribution's packages)")


def make_certificate(directory: pathlib.Path, ca_directory: pathlib.Path, names: list[str], ca_subject: str,
                     days: int, needed_by: str) -> pathlib.Path:
    """Writes `tls.crt` and `tls.key` into `directory`, for the subject alternative `names`
    (`DNS:...` or `IP:...`, the first one also the common name), signed by a CA of their own
    whose `ca.crt` and `ca.key` go into `ca_directory`; returns the CA's certificate."""
    require("openssl", needed_by)
    directory.mkdir(parents=True, exist_ok=True)
    ca_directory.mkdir(parents=True, exist_ok=True)

    def openssl(*args: str) -> None:
        result = subprocess.run(["openssl", *args], cwd=directory, capture_output=True, text=True)
        if result.returncode != 0:
            raise SystemExit(f"error: openssl {' '.join(args)} failed:\n{result.stderr}")

    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    ca_crt, ca_key = ca_directory / "ca.crt", ca_directory / "ca.key"
    openssl("req", "-x509", *key, "-keyout", str(ca_key), "-out", str(ca_crt), "-days", str(days),
            "-subj", f"/CN={ca_subject}",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
    common_name = names[0].split(":", 1)[1]
    openssl("req", *key, "-keyout", "tls.key", "-out", str(ca_directory / "tls.csr"), "-subj", f"/CN={common_name}")
    extensions = ca_directory / "tls.ext"
    extensions.write_text(f"subjectAltName={','.join(names)}\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", str(ca_directory / "tls.csr"), "-CA", str(ca_crt), "-CAkey", str(ca_key),
            "-CAcreateserial", "-out", "tls.crt", "-days", str(days), "-extfile", str(extensions))
    return ca_crt
