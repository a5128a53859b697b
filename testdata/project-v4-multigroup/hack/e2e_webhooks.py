"""The manager's webhooks over HTTPS, posted to as the API server posts to them (e2e_local.py).

The manager serves them with a certificate that `make_certificate` makes: a CA, and a serving
certificate it signs for 127.0.0.1 and the webhook Service's DNS name, in the directory
`--webhook-cert-path` reads, as cert-manager's Secret is mounted in a cluster. The client
verifies the server against that CA, as the API server does with a webhook's `caBundle`.

- Every webhook of config/webhook/manifests.yaml gets an AdmissionReview for each operation of
  its rules, and every answer echoes the request's `uid`.
- A mutating webhook admits its kind's sample as the API server sends it on create
  (`creationTimestamp: null`). Its patch, if any, is a JSON patch that applies to that object,
  and defaulting the result again answers no patch: the API server may call a mutating webhook
  more than once, so it must be idempotent.
- A validating webhook admits the (defaulted) sample on create, update and delete, as far as
  its rules name them.
- Both deny an object that does not read as their kind with `422` and the reason, rather than
  fail the request.
- Every CRD that config/crd/patches points at the conversion webhook has its hub (storage)
  version's sample converted, in a review of two objects, to each of its other versions and
  back: the objects keep their order and metadata, and come back as they were. A review for a
  version the CRD does not have is answered with a `Failure` result, not an error status.
- With `--enable-http2=false` (the default), a request in HTTP/2 with prior knowledge (`curl
  --http2-prior-knowledge --no-alpn`: no ALPN to fall back with) gets no HTTP/2 answer, on the
  webhook port and on the metrics port. A replica started with `--enable-http2` answers one, so
  the check can fail.

Where this differs from a real API server: the emulator does not call the webhooks when objects
are written (no admission there), so the samples the controllers reconcile were never defaulted.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import copy
import json
import pathlib
import ssl
import uuid
from typing import Any

import aiohttp
import yaml

import certificates
from kube_emulator import PatchFailed, json_patch

OPTIONS = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}
STORED_METADATA = {"uid": "6f8c0d2e-0000-4000-8000-000000000001", "resourceVersion": "1", "generation": 1,
                   "creationTimestamp": "2026-01-01T00:00:00Z"}


def require(tool: str) -> None:
    certificates.require(tool, "the webhook checks")


def make_certificate(directory: pathlib.Path) -> pathlib.Path:
    """Writes `tls.crt` and `tls.key` in `directory`, signed by a CA of their own; returns the
    CA's certificate, which is kept out of `directory`."""
    return certificates.make_certificate(
        directory, directory.parent, ["DNS:webhook-service.system.svc", "DNS:localhost", "IP:127.0.0.1"],
        "e2e-local CA", 1, "the webhook checks")


def client_context(ca: pathlib.Path) -> ssl.SSLContext:
    """TLS as the API server calls a webhook: the server's certificate verified against `ca`."""
    return ssl.create_default_context(cafile=str(ca))


async def post(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> dict[str, Any]:
    async with session.post(url, json=body, timeout=aiohttp.ClientTimeout(total=10)) as response:
        text = await response.text()
        assert response.status == 200, f"POST {url} answered {response.status}: {text}"
        assert response.version == aiohttp.HttpVersion11, f"POST {url}: HTTP/{response.version}"
        return json.loads(text)


def admission_review(operation: str, gvk: dict, resource: dict, namespace: str | None, name: str,
                     obj: dict | None, old: dict | None = None) -> dict[str, Any]:
    request = {
        "uid": str(uuid.uuid4()), "kind": gvk, "resource": resource, "requestKind": gvk,
        "requestResource": resource, "name": name, "operation": operation,
        "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
        "object": obj, "oldObject": old, "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": OPTIONS[operation]},
    }
    if namespace:
        request["namespace"] = namespace
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def response_of(review: dict, reply: dict, what: str) -> dict[str, Any]:
    assert (reply.get("apiVersion"), reply.get("kind")) == ("admission.k8s.io/v1", "AdmissionReview"), \
        f"{what}: not an AdmissionReview: {reply}"
    response = reply.get("response") or {}
    assert response.get("uid") == review["request"]["uid"], \
        f"{what}: the answer's uid {response.get('uid')!r} is not the request's {review['request']['uid']!r}"
    return response


def admitted(response: dict, what: str) -> None:
    assert response.get("allowed") is True, f"{what}: denied: {response.get('status')}"


def patched(obj: dict, response: dict, what: str) -> dict | None:
    """The object with the answer's patch applied, or None without a patch."""
    if response.get("patch") is None:
        assert response.get("patchType") is None, f"{what}: a patchType without a patch: {response}"
        return None
    assert response.get("patchType") == "JSONPatch", f"{what}: patchType {response.get('patchType')!r}"
    # []byte in the API: base64 in JSON.
    assert isinstance(response["patch"], str), f"{what}: the patch is not base64 text: {response['patch']!r}"
    try:
        operations = json.loads(base64.b64decode(response["patch"], validate=True))
    except (ValueError, binascii.Error) as error:
        raise AssertionError(f"{what}: the patch is not base64 of JSON: {error}: {response['patch']!r}") from None
    assert isinstance(operations, list), f"{what}: the patch is not a JSON patch: {operations}"
    try:
        return json_patch(copy.deepcopy(obj), operations)
    except PatchFailed as error:
        raise AssertionError(f"{what}: the patch does not apply to the object sent: {error}: {operations}") from None


class Target:
    """A resource a webhook's rules name, and the object to send for it."""

    def __init__(self, group: str, version: str, plural: str, kind: str, namespaced: bool, sample: dict | None,
                 namespace: str) -> None:
        self.gvk = {"group": group, "version": version, "kind": kind}
        self.resource = {"group": group, "version": version, "resource": plural}
        self.namespace = namespace if namespaced else None
        api_version = f"{group}/{version}" if group else version
        obj = copy.deepcopy(sample) if sample else {"apiVersion": api_version, "kind": kind,
                                                   "metadata": {"name": f"{kind.lower()}-sample"}}
        if self.namespace:
            obj["metadata"]["namespace"] = self.namespace
        self.name = obj["metadata"]["name"]
        # As the API server sends an object it is creating.
        obj["metadata"]["creationTimestamp"] = None
        self.created = obj

    def stored(self, obj: dict) -> dict:
        """`obj` as the API server has stored it, for updates and deletes."""
        obj = copy.deepcopy(obj)
        obj["metadata"].update(STORED_METADATA)
        return obj

    def review(self, operation: str, obj: dict | None, old: dict | None = None) -> dict[str, Any]:
        return admission_review(operation, self.gvk, self.resource, self.namespace, self.name, obj, old)

    def unreadable(self) -> dict:
        obj = copy.deepcopy(self.created)
        obj["metadata"]["labels"] = "not a map"
        return obj


def targets(webhook: dict, emulator, samples: dict, namespace: str) -> list[Target]:
    found = []
    for rule in webhook.get("rules") or []:
        for group in rule.get("apiGroups") or []:
            for version in rule.get("apiVersions") or []:
                for plural in rule.get("resources") or []:
                    known = emulator.kinds.get((group, version, plural))
                    assert known, f"webhook {webhook['name']}: the emulator serves no {plural}.{group}/{version}"
                    kind, namespaced, _ = known
                    api_version = f"{group}/{version}" if group else version
                    found.append((Target(group, version, plural, kind, namespaced,
                                         samples.get((api_version, kind)), namespace),
                                  set(rule.get("operations") or [])))
    return found


async def check_admission(session, base: str, project_dir: pathlib.Path, emulator, samples: dict,
                          namespace: str) -> int:
    documents = [d for d in yaml.safe_load_all((project_dir / "config/webhook/manifests.yaml").read_text()) if d]
    mutating = [w for d in documents if d["kind"] == "MutatingWebhookConfiguration" for w in d.get("webhooks") or []]
    validating = [w for d in documents if d["kind"] == "ValidatingWebhookConfiguration" for w in d.get("webhooks") or []]
    defaulted: dict[tuple[str, str, str], dict] = {}
    reviews = patches = 0
    for webhook in mutating:
        path = webhook["clientConfig"]["service"]["path"]
        for target, operations in targets(webhook, emulator, samples, namespace):
            what = f"{path} ({target.gvk['kind']})"
            obj = target.created
            if "CREATE" in operations:
                review = target.review("CREATE", obj)
                response = response_of(review, await post(session, base + path, review), what)
                admitted(response, f"{what}: the sample, created")
                after = patched(obj, response, f"{what}: the sample, created")
                patches += after is not None
                obj = after or obj
                assert (obj["apiVersion"], obj["kind"], obj["metadata"]["name"]) == \
                       (target.created["apiVersion"], target.created["kind"], target.name), \
                       f"{what}: the patch changed what the object is: {obj}"
                again = target.review("CREATE", obj)
                response = response_of(again, await post(session, base + path, again), what)
                admitted(response, f"{what}: the defaulted sample")
                assert patched(obj, response, what) in (None, obj), \
                    f"{what}: defaulting the defaulted sample changed it again: the webhook is not idempotent"
                reviews += 2
            if "UPDATE" in operations:
                stored = target.stored(obj)
                review = target.review("UPDATE", stored, stored)
                response = response_of(review, await post(session, base + path, review), what)
                admitted(response, f"{what}: the defaulted sample, updated")
                assert patched(stored, response, what) in (None, stored), \
                    f"{what}: an update of the defaulted sample was defaulted again"
                reviews += 1
            await denies_unreadable(session, base + path, target, what)
            reviews += 1
            defaulted[tuple(target.resource.values())] = obj
    for webhook in validating:
        path = webhook["clientConfig"]["service"]["path"]
        for target, operations in targets(webhook, emulator, samples, namespace):
            what = f"{path} ({target.gvk['kind']})"
            obj = defaulted.get(tuple(target.resource.values()), target.created)
            stored = target.stored(obj)
            sent = {"CREATE": (obj, None), "UPDATE": (stored, stored), "DELETE": (None, stored)}
            for operation in sorted(operations & set(sent)):
                review = target.review(operation, *sent[operation])
                response = response_of(review, await post(session, base + path, review), what)
                admitted(response, f"{what}: the sample, {operation}")
                assert response.get("patch") is None, f"{what}: a validating webhook answered a patch"
                reviews += 1
            await denies_unreadable(session, base + path, target, what)
            reviews += 1
    assert reviews or not (mutating or validating), "no admission review was sent"
    return reviews, patches


async def denies_unreadable(session, url: str, target: Target, what: str) -> None:
    review = target.review("CREATE", target.unreadable())
    response = response_of(review, await post(session, url, review), what)
    assert response.get("allowed") is False, f"{what}: admitted an object that is not a {target.gvk['kind']}"
    status = response.get("status") or {}
    assert status.get("code") == 422 and status.get("message"), f"{what}: denied with {status}"


def conversion_crds(project_dir: pathlib.Path) -> list[dict]:
    """The CRDs of config/crd/bases that a patch of config/crd/patches converts by webhook."""
    bases = {}
    for file in sorted((project_dir / "config/crd/bases").glob("*.yaml")):
        for crd in yaml.safe_load_all(file.read_text()):
            if crd:
                bases[crd["metadata"]["name"]] = crd
    converted = []
    for file in sorted((project_dir / "config/crd/patches").glob("*.yaml")):
        for patch in yaml.safe_load_all(file.read_text()):
            conversion = ((patch or {}).get("spec") or {}).get("conversion") or {}
            if patch and patch.get("kind") == "CustomResourceDefinition" and conversion.get("strategy") == "Webhook":
                name = patch["metadata"]["name"]
                assert name in bases, f"{file.name} patches the CRD {name}, which config/crd/bases does not have"
                converted.append(bases[name])
    return converted


def conversion_review(desired: str, objects: list[dict]) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": str(uuid.uuid4()), "desiredAPIVersion": desired, "objects": objects}}


async def convert(session, url: str, desired: str, objects: list[dict], what: str) -> dict[str, Any]:
    review = conversion_review(desired, objects)
    reply = await post(session, url, review)
    assert (reply.get("apiVersion"), reply.get("kind")) == ("apiextensions.k8s.io/v1", "ConversionReview"), \
        f"{what}: not a ConversionReview: {reply}"
    response = reply.get("response") or {}
    assert response.get("uid") == review["request"]["uid"], \
        f"{what}: the answer's uid {response.get('uid')!r} is not the request's"
    return response


async def check_conversion(session, base: str, project_dir: pathlib.Path, samples: dict) -> int:
    reviews = 0
    for crd in conversion_crds(project_dir):
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        versions = [v["name"] for v in crd["spec"]["versions"]]
        hub = next(v["name"] for v in crd["spec"]["versions"] if v.get("storage"))
        url = base + "/convert"
        sample = samples.get((f"{group}/{hub}", kind))
        assert sample, f"no sample of {kind} {group}/{hub} in config/samples to convert"
        first = {**copy.deepcopy(sample), "metadata": {**sample["metadata"], "namespace": "default",
                                                       **STORED_METADATA}}
        second = copy.deepcopy(first)
        second["metadata"].update(name=f"{first['metadata']['name']}-2", uid="6f8c0d2e-0000-4000-8000-000000000002")
        second["metadata"].setdefault("annotations", {})["e2e-local/second"] = "yes"
        objects = [first, second]
        for spoke in (v for v in versions if v != hub):
            what = f"/convert ({kind} {hub} to {spoke})"
            response = await convert(session, url, f"{group}/{spoke}", objects, what)
            assert (response.get("result") or {}).get("status") == "Success", f"{what}: {response.get('result')}"
            converted = response.get("convertedObjects") or []
            assert [o.get("apiVersion") for o in converted] == [f"{group}/{spoke}"] * 2, f"{what}: {converted}"
            assert [o["metadata"] for o in converted] == [o["metadata"] for o in objects], \
                f"{what}: the metadata changed or the order did: {converted}"
            what = f"/convert ({kind} {spoke} back to {hub})"
            response = await convert(session, url, f"{group}/{hub}", converted, what)
            assert (response.get("result") or {}).get("status") == "Success", f"{what}: {response.get('result')}"
            assert response.get("convertedObjects") == objects, \
                f"{what}: the round trip is not lossless: {response.get('convertedObjects')} != {objects}"
            reviews += 2
        what = f"/convert ({kind} to a version it does not have)"
        response = await convert(session, url, f"{group}/v0nonexistent", objects[:1], what)
        result = response.get("result") or {}
        assert result.get("status") == "Failure" and result.get("message"), f"{what}: {result}"
        reviews += 1
    return reviews


CURL_COULDNT_CONNECT = 7


async def http_version(url: str, ca: pathlib.Path | None) -> tuple[str, str, int]:
    """The HTTP version curl's prior-knowledge HTTP/2 request got an answer in ("0" for none),
    curl's error and its exit code."""
    require("curl")
    trust = ["--cacert", str(ca)] if ca else ["--insecure"]
    curl = await asyncio.create_subprocess_exec(
        "curl", "--silent", "--show-error", "--no-alpn", "--http2-prior-knowledge", *trust, "--max-time", "10",
        "--output", "/dev/null", "--write-out", "%{http_version}", url,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await curl.communicate()
    return out.decode().strip(), err.decode().strip(), curl.returncode


async def check_http2_refused(webhook_url: str, metrics_url: str, ca: pathlib.Path) -> None:
    for url in (webhook_url, metrics_url):
        version, error, code = await http_version(url, ca)
        assert code != CURL_COULDNT_CONNECT, f"curl could not connect to {url}: {error}"
        assert version != "2", f"{url} answered a prior-knowledge HTTP/2 request with --enable-http2=false"
        assert code != 0 and error, f"curl took no HTTP/2 answer from {url} but reports no error"


async def check_http2_served(url: str, ca: pathlib.Path) -> None:
    version, error, _ = await http_version(url, ca)
    assert version == "2", f"{url} did not answer HTTP/2 with --enable-http2: version {version!r}, {error}"


async def check_webhooks(port: int, ca: pathlib.Path, project_dir: pathlib.Path, emulator, samples: dict,
                         namespace: str) -> None:
    base = f"https://127.0.0.1:{port}"
    connector = aiohttp.TCPConnector(ssl=client_context(ca))
    async with aiohttp.ClientSession(connector=connector) as session:
        admissions, patches = await check_admission(session, base, project_dir, emulator, samples, namespace)
        conversions = await check_conversion(session, base, project_dir, samples)
    print(f"   {admissions} AdmissionReviews ({patches} samples defaulted by a patch) and {conversions} "
          f"ConversionReviews answered over HTTPS as the API server expects")
