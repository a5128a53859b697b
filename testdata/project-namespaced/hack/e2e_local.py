"""Runs the manager as a process against an emulated API server (hack/kube_emulator.py).

`make test-e2e-local` builds the manager and runs this. It checks, with a timeout on every
wait:
- the manager starts with a kubeconfig pointing at the emulator, takes the leader election
  Lease and reports ready on /readyz once its controllers' caches synced;
- every sample of a kind with a controller gets the controller's finalizer and a `...Ready`
  condition that is `True` for the sample's generation; a kind that runs an image
  (`create api --image`) gets its Deployment, and once the test writes that Deployment's
  status as available, the `Available` condition;
- deleting a sample runs the controller's cleanup: the finalizer goes, and so does the object;
- SIGTERM stops the manager cleanly (exit 0) and releases the Lease.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import signal
import socket
import sys
import tempfile

import aiohttp
import kmock
import yaml

# No __pycache__ in the project's tree.
sys.dont_write_bytecode = True
sys.path.insert(0, str(pathlib.Path(__file__).parent))
from kube_emulator import KubeEmulator  # noqa: E402

NAMESPACE = "default"
TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def split_api_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


def reconciled_kinds(project: dict) -> set[tuple[str, str, str]]:
    """(group, version, kind) of the resources PROJECT gives a controller."""
    kinds = set()
    for resource in project.get("resources") or []:
        if not (resource.get("controller") or resource.get("controllers")):
            continue
        group = resource.get("group", "")
        domain = resource.get("domain", "")
        qualified = f"{group}.{domain}" if group and domain else (group or domain)
        kinds.add((qualified, resource["version"], resource["kind"]))
    return kinds


async def step(what: str, awaitable):
    print(f"-- {what}", flush=True)
    return await awaitable


async def http_get(url: str) -> int:
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=2)) as response:
                return response.status
    except (aiohttp.ClientError, asyncio.TimeoutError):
        return 0


async def wait_http(url: str, want: int, what: str, manager) -> None:
    deadline = asyncio.get_running_loop().time() + TIMEOUT
    while await http_get(url) != want:
        if manager.returncode is not None:
            raise AssertionError(f"the manager exited with {manager.returncode} before {what}")
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not within {TIMEOUT} s: {what}")
        await asyncio.sleep(0.2)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manager", required=True, help="the manager binary")
    parser.add_argument("--project", default=".", help="the project's directory")
    args = parser.parse_args()
    project_dir = pathlib.Path(args.project)
    project = yaml.safe_load((project_dir / "PROJECT").read_text())

    emulator = KubeEmulator()
    async with kmock.Server(emulator) as server:
        api = f"http://{server.host}:{server.port}"
        async with aiohttp.ClientSession(base_url=api) as client:
            for crd_file in sorted((project_dir / "config/crd/bases").glob("*.yaml")):
                for crd in yaml.safe_load_all(crd_file.read_text()):
                    async with client.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd) as r:
                        assert r.status == 201, (crd_file, r.status, await r.text())
            print(f"-- installed the CRDs of config/crd/bases in the emulator at {api}")

            with tempfile.TemporaryDirectory() as tmp:
                kubeconfig = pathlib.Path(tmp, "kubeconfig")
                kubeconfig.write_text(json.dumps({
                    "apiVersion": "v1", "kind": "Config", "current-context": "emulator",
                    "clusters": [{"name": "emulator", "cluster": {"server": api}}],
                    "contexts": [{"name": "emulator", "context": {"cluster": "emulator", "user": "test", "namespace": NAMESPACE}}],
                    "users": [{"name": "test", "user": {"token": "test"}}],
                }))
                probe = free_port()
                env = {**os.environ, "KUBECONFIG": str(kubeconfig), "POD_NAMESPACE": NAMESPACE,
                       "POD_NAME": "manager-0", "ENABLE_WEBHOOKS": "false"}
                if project.get("namespaced"):
                    env["WATCH_NAMESPACE"] = NAMESPACE
                manager = await asyncio.create_subprocess_exec(
                    args.manager, "--leader-elect", "--metrics-bind-address", "0",
                    "--health-probe-bind-address", f"127.0.0.1:{probe}", env=env)
                try:
                    await run_checks(emulator, client, project, project_dir, manager, probe)
                finally:
                    if manager.returncode is None:
                        manager.kill()
                        await manager.wait()
    print("e2e-local: passed")
    return 0


async def run_checks(emulator, client, project, project_dir, manager, probe) -> None:
    await step("the manager reports ready on /readyz",
               wait_http(f"http://127.0.0.1:{probe}/readyz", 200, "/readyz answers 200", manager))
    leases = emulator.list("coordination.k8s.io", "v1", "leases")
    assert len(leases) == 1 and leases[0]["spec"].get("holderIdentity"), leases
    lease_name = leases[0]["metadata"]["name"]
    print(f"-- the manager holds the Lease {lease_name}: {leases[0]['spec']['holderIdentity']}")

    kinds = reconciled_kinds(project)
    samples = []
    for sample_file in sorted((project_dir / "config/samples").glob("*.yaml")):
        if sample_file.name == "kustomization.yaml":
            continue
        sample = yaml.safe_load(sample_file.read_text())
        group, version = split_api_version(sample["apiVersion"])
        if (group, version, sample["kind"]) not in kinds:
            continue
        plural = next(p for (g, v, p), (k, _, _) in emulator.kinds.items() if (g, v, k) == (group, version, sample["kind"]))
        namespaced = emulator.kinds[group, version, plural][1]
        namespace = NAMESPACE if namespaced else None
        path = f"/apis/{group}/{version}/" + (f"namespaces/{namespace}/" if namespaced else "") + plural
        async with client.post(path, json=sample) as r:
            assert r.status == 201, (sample_file, r.status, await r.text())
        samples.append((sample_file.name, group, version, plural, namespace, sample["metadata"]["name"], path))
    assert samples, "no sample of a kind with a controller in config/samples"

    for file, group, version, plural, namespace, name, _ in samples:
        await reconciled(emulator, file, group, version, plural, namespace, name)

    for file, group, version, plural, namespace, name, path in samples:
        async with client.delete(f"{path}/{name}") as r:
            assert r.status in (200, 202), (file, r.status, await r.text())
        await step(f"{file}: deleted, the controller cleans up and the object goes",
                   emulator.wait_for(lambda: emulator.get(group, version, plural, namespace, name) is None,
                                     TIMEOUT, f"{file} gone after its deletion"))

    print("-- SIGTERM: the manager exits cleanly and releases the Lease", flush=True)
    manager.send_signal(signal.SIGTERM)
    try:
        code = await asyncio.wait_for(manager.wait(), 40)
    except TimeoutError:
        raise AssertionError("the manager did not exit within 40 s of SIGTERM") from None
    assert code == 0, f"the manager exited with {code} after SIGTERM"
    lease = emulator.get("coordination.k8s.io", "v1", "leases", NAMESPACE, lease_name)
    assert not lease["spec"].get("holderIdentity"), f"the Lease is still held: {lease['spec']}"


def condition(obj: dict | None, is_type) -> dict | None:
    """The object, if it has its finalizer and a `True` condition `is_type` accepts, observed
    at its generation."""
    if not obj or not obj["metadata"].get("finalizers"):
        return None
    generation = obj["metadata"]["generation"]
    for c in (obj.get("status") or {}).get("conditions") or []:
        if is_type(c["type"]) and c["status"] == "True" and c.get("observedGeneration") == generation:
            return obj
    return None


async def reconciled(emulator, file, group, version, plural, namespace, name) -> None:
    def observed():
        obj = emulator.get(group, version, plural, namespace, name)
        if obj and obj["metadata"].get("finalizers") and (obj.get("status") or {}).get("conditions"):
            return obj
        return None
    obj = await step(f"{file}: the controller adds its finalizer and reports conditions",
                     emulator.wait_for(observed, TIMEOUT, f"{file} reconciled"))
    deployment = emulator.get("apps", "v1", "deployments", namespace, name)
    owned = deployment is not None and any(
        o.get("uid") == obj["metadata"]["uid"] for o in deployment["metadata"].get("ownerReferences", []))
    if owned:
        # No Deployment controller runs here: write the status one would, all pods available.
        replicas = deployment["spec"].get("replicas", 1)
        await emulator.set_status("apps", "v1", "deployments", namespace, name, {
            "observedGeneration": deployment["metadata"]["generation"], "replicas": replicas,
            "updatedReplicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas,
            "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}],
        })
        obj = await step(f"{file}: its Deployment is available, and so is the {obj['kind']}",
                         emulator.wait_for(lambda: condition(emulator.get(group, version, plural, namespace, name),
                                                             lambda t: t == "Available"),
                                           TIMEOUT, f"{file} Available"))
    else:
        obj = await step(f"{file}: its Ready condition is True for its generation",
                         emulator.wait_for(lambda: condition(emulator.get(group, version, plural, namespace, name),
                                                             lambda t: t.endswith("Ready")),
                                           TIMEOUT, f"{file} Ready"))
    print(f"   finalizers {obj['metadata']['finalizers']}, conditions "
          f"{[(c['type'], c['status']) for c in obj['status']['conditions']]}")


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
