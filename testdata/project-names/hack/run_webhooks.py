"""Runs the manager on this machine with its webhooks served, for a cluster whose API server
can reach this machine (`make run-webhooks WEBHOOK_HOST=<address>`).

In a cluster, the API server calls the webhooks through the webhook Service, with the CA that
cert-manager injects. Here, this script:

- makes a CA and a serving certificate for `--host` (an IP address or a DNS name of this
  machine that the API server reaches: `host.docker.internal` from Kind on Docker Desktop, the
  machine's address on the network otherwise), valid for 7 days, in `--cert-dir`;
- writes webhook configurations from config/webhook/manifests.yaml whose `clientConfig` is
  `url: https://<host>:<port><path>` with that CA as `caBundle`, named `<project>-local-...` so
  that they never replace a deployed manager's, and points the conversion webhook of every CRD
  that config/crd/patches converts at the same address (the CRDs must be installed: `make
  install`);
- runs the manager (the command after `--`) with `ENABLE_WEBHOOKS=true`, `--webhook-cert-path`
  and `--webhook-port`, and removes the webhook configurations when it stops, however it stops:
  with `failurePolicy: Fail`, a configuration left pointing at a stopped manager would refuse
  every write of its kinds. The CRDs keep the local address until `make install` again.

`--print` writes the configurations and the CRD patches to stdout instead, and runs nothing.
It needs `openssl`, `kubectl` and PyYAML (`make run-webhooks` uses the virtualenv of `make
test-e2e-local`).
"""

import argparse
import base64
import copy
import ipaddress
import json
import os
import pathlib
import signal
import subprocess
import sys

import yaml

# No __pycache__ in the project's tree.
sys.dont_write_bytecode = True
sys.path.insert(0, str(pathlib.Path(__file__).parent))
import certificates  # noqa: E402

PROJECT = "names-operator"


def make_certificate(directory: pathlib.Path, host: str) -> bytes:
    """Writes `tls.crt` and `tls.key` for `host` into `directory`, signed by a CA of their own
    (`ca.crt`, `ca.key`, next to them); returns the CA's certificate."""
    try:
        ipaddress.ip_address(host)
        name = f"IP:{host}"
    except ValueError:
        name = f"DNS:{host}"
    ca = certificates.make_certificate(directory, directory, [name], f"{PROJECT} local webhooks CA", 7,
                                       "run-webhooks")
    return ca.read_bytes()


def local_configurations(project: pathlib.Path, base_url: str, ca: bytes) -> list[dict]:
    """The webhook configurations of config/webhook/manifests.yaml, calling `base_url`."""
    manifests = project / "config/webhook/manifests.yaml"
    bundle = base64.b64encode(ca).decode()
    configurations = []
    for document in yaml.safe_load_all(manifests.read_text()) if manifests.exists() else []:
        if not document or not document.get("webhooks"):
            continue
        local = copy.deepcopy(document)
        local["metadata"] = {"name": f"{PROJECT}-local-{document['metadata']['name']}",
                             "labels": {"app.kubernetes.io/name": PROJECT,
                                        "app.kubernetes.io/managed-by": "run-webhooks"}}
        for webhook in local["webhooks"]:
            service = webhook["clientConfig"]["service"]
            webhook["clientConfig"] = {"url": base_url + service.get("path", "/"), "caBundle": bundle}
        configurations.append(local)
    return configurations


def conversion_patches(project: pathlib.Path, base_url: str, ca: bytes) -> dict[str, dict]:
    """A merge patch for each CRD that config/crd/patches converts by webhook, by CRD name."""
    patches = {}
    for file in sorted((project / "config/crd/patches").glob("*.yaml")):
        for patch in yaml.safe_load_all(file.read_text()):
            conversion = ((patch or {}).get("spec") or {}).get("conversion") or {}
            if patch and patch.get("kind") == "CustomResourceDefinition" and conversion.get("strategy") == "Webhook":
                webhook = conversion.get("webhook") or {}
                path = ((webhook.get("clientConfig") or {}).get("service") or {}).get("path", "/convert")
                patches[patch["metadata"]["name"]] = {"spec": {"conversion": {
                    "strategy": "Webhook",
                    "webhook": {
                        "conversionReviewVersions": webhook.get("conversionReviewVersions", ["v1"]),
                        "clientConfig": {"url": base_url + path,
                                         "caBundle": base64.b64encode(ca).decode()},
                    },
                }}}
    return patches


def kubectl(binary: str, *args: str, stdin: str | None = None) -> None:
    result = subprocess.run([binary, *args], input=stdin, text=True, capture_output=True)
    if result.returncode != 0:
        raise SystemExit(f"error: kubectl {' '.join(args)} failed:\n{result.stderr}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", required=True, help="the address the API server reaches this machine at")
    parser.add_argument("--port", type=int, default=9443, help="the webhook port")
    parser.add_argument("--cert-dir", default="bin/local-webhooks", help="where the certificate goes")
    parser.add_argument("--kubectl", default="kubectl")
    parser.add_argument("--print", action="store_true", help="print the configurations and CRD patches, run nothing")
    parser.add_argument("manager", nargs=argparse.REMAINDER, help="-- and the manager's command")
    args = parser.parse_args()
    project = pathlib.Path.cwd()
    host = args.host if ":" not in args.host else f"[{args.host}]"
    base_url = f"https://{host}:{args.port}"
    cert_dir = pathlib.Path(args.cert_dir).resolve()
    ca = make_certificate(cert_dir, args.host)
    configurations = local_configurations(project, base_url, ca)
    patches = conversion_patches(project, base_url, ca)
    if args.print:
        documents = configurations + [{"crd": name, "patch": patch} for name, patch in patches.items()]
        print(yaml.safe_dump_all(documents, sort_keys=False), end="")
        return 0
    command = args.manager[1:] if args.manager[:1] == ["--"] else args.manager
    if not command:
        raise SystemExit("error: no manager command after `--`")
    if not configurations and not patches:
        print("note: the project has no webhooks; running the manager without them", file=sys.stderr)
    listing = yaml.safe_dump_all(configurations, sort_keys=False)
    if configurations:
        kubectl(args.kubectl, "apply", "-f", "-", stdin=listing)
    for name, patch in patches.items():
        kubectl(args.kubectl, "patch", "crd", name, "--type", "merge", "-p", json.dumps(patch))
    print(f"webhooks at {base_url}, with the CA of {cert_dir / 'ca.crt'}", file=sys.stderr)
    # A session of its own: Ctrl-C reaches this script alone, which passes it on once, so that
    # the manager shuts down cleanly (a second signal would stop it at once).
    manager = subprocess.Popen(
        [*command, f"--webhook-cert-path={cert_dir}", f"--webhook-port={args.port}"],
        env={**os.environ, "ENABLE_WEBHOOKS": "true"},
        start_new_session=True,
    )

    def stop(signum, _frame):
        os.killpg(manager.pid, signum)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        code = manager.wait()
    finally:
        if configurations:
            kubectl(args.kubectl, "delete", "--ignore-not-found", "-f", "-", stdin=listing)
    return code


if __name__ == "__main__":
    sys.exit(main())
