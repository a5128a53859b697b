"""An emulated Kubernetes API server for running the manager without a cluster.

It is kmock's `KubernetesEmulator` (https://pypi.org/project/kmock/) with what the manager
needs and kmock leaves out. Where it still differs from a real API server, it says so below;
a test that relies on one of those differences is wrong, not the manager.

What it adds to kmock:
- objects get a `uid`, a `creationTimestamp`, a `generation` that grows when anything but
  `metadata` and `status` changes, and a `resourceVersion` that grows on every write;
- a write that names a `resourceVersion` other than the object's is refused with 409, as
  optimistic concurrency requires (leader election depends on it);
- `PUT` replaces an object; `PATCH` applies JSON patches (RFC 6902, with `test`), merge
  patches (RFC 7386) and server-side apply;
- with a status subresource, `/status` writes change only `status`, and writes to the object
  leave `status` alone;
- a CustomResourceDefinition that is created serves its resource at once;
- deletion with finalizers sets `deletionTimestamp`; the object goes once they are removed;
- watches stream `ADDED`, `MODIFIED` and `DELETED` events from the `resourceVersion` they ask
  for, and lists carry the current `resourceVersion`;
- `TokenReview` and `SubjectAccessReview` answer from `tokens` and `allowed`.

Where it differs from a real API server:
- server-side apply and strategic merge patches are merge patches: a list in the patch
  replaces the list of the object (a real server merges list-maps such as `conditions` by
  key, and tracks field managers);
- no admission, defaulting, validation against the CRD's schema, or garbage collection of
  owned objects;
- a watch never expires (no 410 Gone), and bookmarks are not sent.
"""

from __future__ import annotations

import asyncio
import bisect
import copy
import datetime
import gzip
import importlib.resources
import json
import uuid
from typing import Any

import aiohttp.web
import kmock

def builtin_resources() -> list[tuple[str, str, str, str, bool, set[str]]]:
    """Kubernetes' own resources, from the discovery documents of a real cluster that kmock
    carries: (group, version, plural, kind, namespaced, subresources)."""
    data = importlib.resources.files("kmock._internal").joinpath("resources.json.gz").read_bytes()
    found = []
    for document in json.loads(gzip.decompress(data)):
        group, _, version = document["groupVersion"].rpartition("/")
        listed = document["resources"]
        for resource in listed:
            if "/" in resource["name"]:
                continue
            subresources = {r["name"].split("/", 1)[1] for r in listed if r["name"].startswith(resource["name"] + "/")}
            found.append((group, version, resource["name"], resource["kind"], resource["namespaced"], subresources))
    return found


JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


def now() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386: a merge patch applied to `target`."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge(result.get(key), value)
    return result


class PatchFailed(Exception):
    pass


def json_patch(document: Any, operations: list[dict[str, Any]]) -> Any:
    """RFC 6902: the JSON patch `operations` applied to a copy of `document`."""
    document = copy.deepcopy(document)

    def locate(path: str) -> tuple[Any, str | int]:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]
        parent = document
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last = parts[-1]
        if isinstance(parent, list):
            return parent, (len(parent) if last == "-" else int(last))
        return parent, last

    for op in operations:
        path = op["path"]
        if path == "":
            raise PatchFailed("patches of the whole document are not supported")
        kind = op["op"]
        try:
            parent, key = locate(path)
            if kind == "test":
                current = parent[key] if (isinstance(parent, dict) and key in parent) or (
                    isinstance(parent, list) and isinstance(key, int) and key < len(parent)) else None
                if current != op.get("value"):
                    raise PatchFailed(f"test of {path} failed: {current!r} is not {op.get('value')!r}")
            elif kind == "add":
                if isinstance(parent, list):
                    parent.insert(key, op["value"])
                else:
                    parent[key] = op["value"]
            elif kind == "replace":
                if isinstance(parent, dict) and key not in parent:
                    raise PatchFailed(f"{path} does not exist")
                parent[key] = op["value"]
            elif kind == "remove":
                del parent[key]
            else:
                raise PatchFailed(f"unsupported operation {kind}")
        except (KeyError, IndexError, TypeError, ValueError) as error:
            raise PatchFailed(f"{kind} {path}: {error}") from error
    return document


class KubeEmulator(kmock.KubernetesEmulator):
    """kmock's emulator with resource versions, conflicts, patches, CRDs and reviews."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.store: dict[tuple[str, str, str, str | None, str], dict[str, Any]] = {}
        self.kinds: dict[tuple[str, str, str], tuple[str, bool, set[str]]] = {}
        self.revision = 0
        self.history: list[tuple[int, tuple[str, str, str], str, dict[str, Any]]] = []
        # The revision of each event of `history`, for a watch to find where it is.
        self.revisions: list[int] = []
        self.changed = asyncio.Condition()
        # Every write, as (monotonic time, bearer token, method, resource plural, name,
        # subresource), when it arrived: a test tells which replica wrote what by the token of
        # its kubeconfig.
        self.writes: list[tuple[float, str, str, str, str | None, str | None]] = []
        # Status writes to answer late, once: (bearer token, object name) -> seconds.
        self.delays: dict[tuple[str, str], float] = {}
        # Bearer tokens TokenReview accepts, with their user; users SubjectAccessReview allows.
        self.tokens: dict[str, str] = {}
        self.allowed: set[str] = set()
        for group, version, plural, kind, namespaced, subresources in builtin_resources():
            self.serve(group, version, plural, kind, namespaced, subresources)

    def serve(self, group: str, version: str, plural: str, kind: str, namespaced: bool,
              subresources: set[str]) -> None:
        self.kinds[group, version, plural] = (kind, namespaced, subresources)
        key = f"{group}/{version}/{plural}" if group else f"v1/{plural}"
        self.resources[key] = {"namespaced": namespaced, "kind": kind, "subresources": subresources,
                               "verbs": {"get", "list", "watch", "create", "update", "patch", "delete"}}

    # -- reading, for tests --------------------------------------------------------------

    def get(self, group: str, version: str, plural: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        found = self.store.get((group, version, plural, namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def list(self, group: str, version: str, plural: str) -> list[dict[str, Any]]:
        return [copy.deepcopy(o) for (g, v, p, _, _), o in sorted(self.store.items(), key=str) if (g, v, p) == (group, version, plural)]

    async def wait_for(self, predicate, timeout: float, what: str) -> Any:
        """Waits until `predicate()` gives something truthy, at most `timeout` seconds."""
        async def waiting() -> Any:
            async with self.changed:
                while not (result := predicate()):
                    await self.changed.wait()
                return result
        try:
            return await asyncio.wait_for(waiting(), timeout)
        except TimeoutError:
            raise AssertionError(f"not within {timeout} s: {what}") from None

    # -- serving -------------------------------------------------------------------------

    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        resource = request.resource
        if resource is None or resource.plural is None:
            return await super()._handle(request)
        group, version, plural = resource.group or "", resource.version or "", resource.plural
        if (group, version, plural) not in self.kinds:
            return status(404, "NotFound", f"the server could not find the requested resource ({plural}.{group})")
        method = str(request.method.value if hasattr(request.method, "value") else request.method).upper()
        if method in ("POST", "PUT", "PATCH", "DELETE"):
            token = request.headers.get("Authorization", "").removeprefix("Bearer ")
            self.writes.append((asyncio.get_running_loop().time(), token, method, plural, request.name,
                                request.subresource))
            delay = self.delays.pop((token, request.name or ""), None) if request.subresource == "status" else None
            if delay:
                await asyncio.sleep(delay)
        try:
            if request.params.get("watch") in ("true", "1"):
                return await self.watch(request, group, version, plural)
            if method == "GET":
                return self.read(request, group, version, plural)
            if method == "POST":
                return await self.create(request, group, version, plural)
            if method in ("PUT", "PATCH"):
                return await self.update(request, group, version, plural, method)
            if method == "DELETE":
                return await self.delete(request, group, version, plural)
        except PatchFailed as error:
            return status(422, "Invalid", str(error))
        return status(405, "MethodNotAllowed", f"{request.method} is not supported")

    def read(self, request, group, version, plural):
        if request.name is not None:
            found = self.store.get((group, version, plural, request.namespace, request.name))
            if found is None:
                return status(404, "NotFound", f'{plural} "{request.name}" not found')
            return aiohttp.web.json_response(found)
        items = [o for (g, v, p, ns, _), o in sorted(self.store.items(), key=str)
                 if (g, v, p) == (group, version, plural) and (request.namespace is None or ns == request.namespace)]
        selector = request.params.get("labelSelector")
        if selector:
            wanted = dict(part.split("=", 1) for part in selector.split(",") if "=" in part)
            items = [o for o in items if all(o["metadata"].get("labels", {}).get(k) == v for k, v in wanted.items())]
        kind = self.kinds[group, version, plural][0]
        return aiohttp.web.json_response({
            "kind": f"{kind}List", "apiVersion": f"{group}/{version}" if group else version,
            "metadata": {"resourceVersion": str(self.revision)}, "items": items,
        })

    async def watch(self, request, group, version, plural):
        since = int(request.params.get("resourceVersion") or 0)
        response = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request._raw_request)
        if since == 0:
            # From no version: every object as ADDED first, as a real server does.
            for (g, v, p, ns, _), obj in sorted(self.store.items(), key=str):
                if (g, v, p) == (group, version, plural) and (request.namespace is None or ns == request.namespace):
                    await response.write(json.dumps({"type": "ADDED", "object": obj}).encode() + b"\n")
            since = self.revision
        while True:
            async with self.changed:
                await self.changed.wait_for(lambda: bool(self.history) and self.history[-1][0] > since)
                # The history is in revision order: a watch reads only what is new to it, so that
                # thousands of objects do not cost each watch a pass over all of them per write.
                events = self.history[bisect.bisect_right(self.revisions, since):]
            for rev, key, kind, obj in events:
                since = rev
                namespace = obj["metadata"].get("namespace")
                if key == (group, version, plural) and (request.namespace is None or namespace == request.namespace):
                    await response.write(json.dumps({"type": kind, "object": obj}).encode() + b"\n")

    async def set_status(self, group, version, plural, namespace, name, status_: dict[str, Any]) -> None:
        """Writes `status_` into an object as its owner would (a Deployment's controller)."""
        obj = self.store[group, version, plural, namespace, name]
        obj["status"] = status_
        self.bump(obj)
        await self.record((group, version, plural), "MODIFIED", obj)

    async def record(self, key, kind: str, obj: dict[str, Any]) -> None:
        async with self.changed:
            self.history.append((int(obj["metadata"]["resourceVersion"]), key, kind, copy.deepcopy(obj)))
            self.revisions.append(self.history[-1][0])
            self.changed.notify_all()

    def bump(self, obj: dict[str, Any]) -> None:
        self.revision += 1
        obj["metadata"]["resourceVersion"] = str(self.revision)

    async def create(self, request, group, version, plural, body=None):
        kind, namespaced, _ = self.kinds[group, version, plural]
        body = json.loads(request.body or b"{}") if body is None else body
        if plural == "tokenreviews":
            user = self.tokens.get(body.get("spec", {}).get("token", ""))
            body["status"] = {"authenticated": user is not None, **({"user": {"username": user}} if user else {})}
            return aiohttp.web.json_response(body, status=201)
        if plural == "subjectaccessreviews":
            body["status"] = {"allowed": body.get("spec", {}).get("user") in self.allowed}
            return aiohttp.web.json_response(body, status=201)
        meta = body.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        name = meta.get("name")
        if not name:
            return status(422, "Invalid", "metadata.name: Required value")
        namespace = request.namespace if namespaced else None
        if namespaced:
            meta["namespace"] = namespace
        key = (group, version, plural, namespace, name)
        if key in self.store:
            return status(409, "AlreadyExists", f'{plural}.{group} "{name}" already exists')
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=now(), generation=1)
        meta.pop("resourceVersion", None)
        body.setdefault("apiVersion", f"{group}/{version}" if group else version)
        body.setdefault("kind", kind)
        self.bump(body)
        self.store[key] = body
        if plural == "customresourcedefinitions":
            spec = body["spec"]
            for served in spec["versions"]:
                subresources = set(served.get("subresources", {}))
                self.serve(spec["group"], served["name"], spec["names"]["plural"], spec["names"]["kind"],
                           spec["scope"] == "Namespaced", subresources)
        await self.record((group, version, plural), "ADDED", body)
        return aiohttp.web.json_response(body, status=201)

    async def update(self, request, group, version, plural, method):
        _, namespaced, subresources = self.kinds[group, version, plural]
        key = (group, version, plural, request.namespace if namespaced else None, request.name)
        current = self.store.get(key)
        content_type = request.headers.get("Content-Type", request.headers.get("content-type", "")).split(";")[0]
        body = json.loads(request.body) if request.body else {}
        if current is None and content_type == APPLY_PATCH and request.subresource is None:
            # Server-side apply creates what does not exist.
            return await self.create(request, group, version, plural, body)
        if current is None:
            return status(404, "NotFound", f'{plural}.{group} "{request.name}" not found')
        if method == "PUT":
            new = body
        elif content_type == JSON_PATCH:
            new = json_patch(current, body)
        else:
            # Merge patches, strategic merge patches and server-side apply alike: see the
            # module's documentation.
            new = merge(current, body)
        asked = (body.get("metadata") or {}).get("resourceVersion") if isinstance(body, dict) else None
        if asked is not None and asked != current["metadata"]["resourceVersion"] and content_type != APPLY_PATCH:
            return status(409, "Conflict", f'Operation cannot be fulfilled on {plural}.{group} "{request.name}": '
                                            "the object has been modified; please apply your changes to the latest version and try again")
        if "status" in subresources:
            if request.subresource == "status":
                new = {**copy.deepcopy(current), "status": new.get("status")}
            else:
                new["status"] = copy.deepcopy(current.get("status"))
                if new["status"] is None:
                    new.pop("status")
        meta = new.setdefault("metadata", {})
        for field in ("uid", "creationTimestamp", "name", "namespace", "deletionTimestamp"):
            if field in current["metadata"]:
                meta[field] = current["metadata"][field]
        def spec_of(obj):
            return {k: v for k, v in obj.items() if k not in ("metadata", "status")}
        meta["generation"] = current["metadata"].get("generation", 1) + (spec_of(new) != spec_of(current))
        meta["resourceVersion"] = current["metadata"]["resourceVersion"]
        if new == current:
            return aiohttp.web.json_response(current)
        self.bump(new)
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            del self.store[key]
            await self.record(key[:3], "DELETED", new)
        else:
            self.store[key] = new
            await self.record(key[:3], "MODIFIED", new)
        return aiohttp.web.json_response(new)

    async def delete(self, request, group, version, plural):
        _, namespaced, _ = self.kinds[group, version, plural]
        key = (group, version, plural, request.namespace if namespaced else None, request.name)
        current = self.store.get(key)
        if current is None:
            return status(404, "NotFound", f'{plural}.{group} "{request.name}" not found')
        if current["metadata"].get("finalizers"):
            if not current["metadata"].get("deletionTimestamp"):
                current["metadata"]["deletionTimestamp"] = now()
                self.bump(current)
                await self.record(key[:3], "MODIFIED", current)
            return aiohttp.web.json_response(current, status=202)
        del self.store[key]
        self.bump(current)
        await self.record(key[:3], "DELETED", current)
        return aiohttp.web.json_response(current)


def status(code: int, reason: str, message: str) -> aiohttp.web.Response:
    return aiohttp.web.json_response(
        {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
         "message": message, "reason": reason, "code": code},
        status=code,
    )
