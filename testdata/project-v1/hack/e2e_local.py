"""Runs the manager as a process against an emulated API server (hack/kube_emulator.py).

`make test-e2e-local` builds the manager and runs this. It checks, with a timeout on every
wait:
- the manager starts with a kubeconfig pointing at the emulator, takes the leader election
  Lease and reports ready on /readyz once its controllers' caches synced;
- every sample of a kind with a controller gets the controller's finalizer and a `...Ready`
  condition that is `True` for the sample's generation; a kind that runs an image
  (`create api --image`) gets its Deployment, and once the test writes that Deployment's
  status as available, the `Available` condition;
- `/metrics` (HTTPS, as deployed) refuses a request without a token (401) and one whose user
  may not read it (403), both decided by the emulator's TokenReview and SubjectAccessReview,
  and serves the controllers' reconcile counts to an allowed one, with every metric that the
  Grafana dashboards of `edit --plugins=grafana/v1-alpha` query;
- the webhooks answer AdmissionReviews and ConversionReviews over HTTPS, with a certificate
  the test makes, as the API server expects (e2e_webhooks.py says what is checked), and neither
  the webhook port nor the metrics port speaks HTTP/2 unless `--enable-http2` says so;
- with the webhook certificate made by the manager (`config/webhook-self-certs`), two replicas
  started at once keep one CA and serving certificate in one Secret, both serve it, it
  verifies for the webhook Service's name against the CA bundle that they set in every webhook
  configuration and converted CRD calling that Service, and a bundle edited away is set again;
- deleting a sample runs the controller's cleanup: the finalizer goes, and so does the object;
- SIGTERM stops the manager cleanly (exit 0) and releases the Lease.

With `--leader-election N` it then runs N rounds of leader election between replicas, with a
Lease of 3 s, a renew deadline of 2 s and a retry period of 0.5 s:
- of two replicas, exactly one holds the Lease and writes anything but the Lease;
- `kill -9` of the leader: the other takes over once the Lease expired on its clock (no sooner
  than the lease duration after the last renewal it saw), and within the lease duration and two
  retry periods of the kill (it counts the lease duration from the try that saw the last renewal,
  up to a retry period after it, and takes the Lease at its first try past that);
- SIGSTOP of the new leader, once idle, past its renew deadline, while a third replica takes
  over and reconciles a new object: once resumed, the paused one exits with an error and
  writes nothing but, at most, the Lease (the manager fences its controllers' client).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import copy
import json
import os
import pathlib
import re
import signal
import socket
import ssl
import sys
import tempfile

import aiohttp
import kmock
import yaml

# No __pycache__ in the project's tree.
sys.dont_write_bytecode = True
sys.path.insert(0, str(pathlib.Path(__file__).parent))
import e2e_webhooks  # noqa: E402
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
    parser.add_argument("--leader-election", type=int, default=0, metavar="N",
                        help="then run N rounds of leader election between replicas")
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
                # The replicas of the leader-election rounds serve no webhooks: they would all
                # want the same port.
                base_env = {**os.environ, "KUBECONFIG": str(kubeconfig), "POD_NAMESPACE": NAMESPACE,
                            "ENABLE_WEBHOOKS": "false"}
                if project.get("namespaced"):
                    base_env["WATCH_NAMESPACE"] = NAMESPACE
                certs = pathlib.Path(tmp, "certs")
                ca = e2e_webhooks.make_certificate(certs)
                ports = Ports(probe=free_port(), metrics=free_port(), webhook=free_port(), certs=certs, ca=ca)
                env = {**base_env, "POD_NAME": "manager-0", "ENABLE_WEBHOOKS": "true"}
                manager = await asyncio.create_subprocess_exec(
                    args.manager, "--leader-elect", "--metrics-bind-address", f"127.0.0.1:{ports.metrics}",
                    "--metrics-cert-path", str(certs), "--webhook-cert-path", str(certs),
                    "--webhook-port", str(ports.webhook),
                    "--health-probe-bind-address", f"127.0.0.1:{ports.probe}", env=env)
                try:
                    samples = await run_checks(emulator, client, project, project_dir, manager, ports,
                                               args.manager, base_env, pathlib.Path(tmp))
                finally:
                    if manager.returncode is None:
                        manager.kill()
                        await manager.wait()
                for round_ in range(args.leader_election):
                    await leader_election(emulator, client, args.manager, base_env, pathlib.Path(tmp),
                                          samples[0], round_)
    print("e2e-local: passed")
    return 0


class Ports:
    """Where the first manager listens, and the CA of its certificate."""

    def __init__(self, probe: int, metrics: int, webhook: int, certs: pathlib.Path, ca: pathlib.Path) -> None:
        self.probe, self.metrics, self.webhook, self.certs, self.ca = probe, metrics, webhook, certs, ca


async def metrics_get(ports: Ports, token: str | None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    connector = aiohttp.TCPConnector(ssl=e2e_webhooks.client_context(ports.ca))
    async with aiohttp.ClientSession(connector=connector) as session:
        # Prometheus verifies the certificate of --metrics-cert-path, as the test does.
        async with session.get(f"https://127.0.0.1:{ports.metrics}/metrics", headers=headers,
                               timeout=aiohttp.ClientTimeout(total=10)) as response:
            return response.status, await response.text()


def dashboard_metrics(project_dir: pathlib.Path) -> set[str]:
    """The metric names the queries of grafana/'s dashboards of the manager select."""
    names = set()
    for dashboard in sorted((project_dir / "grafana").glob("controller-*-metrics.json")):
        for panel in json.loads(dashboard.read_text())["panels"]:
            for target in panel["targets"]:
                names.update(re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{", target["expr"]))
    return names


async def check_metrics(emulator, port: Ports, project_dir: pathlib.Path, reconciled: int) -> None:
    emulator.tokens.update({"scraper-token": "system:serviceaccount:monitoring:prometheus",
                            "nosy-token": "system:serviceaccount:default:nosy"})
    emulator.allowed.add("system:serviceaccount:monitoring:prometheus")
    code, _ = await metrics_get(port, None)
    assert code == 401, f"/metrics without a token answered {code}"
    code, _ = await metrics_get(port, "unknown-token")
    assert code == 401, f"/metrics with a token TokenReview rejects answered {code}"
    code, _ = await metrics_get(port, "nosy-token")
    assert code == 403, f"/metrics for a user SubjectAccessReview denies answered {code}"
    code, body = await metrics_get(port, "scraper-token")
    assert code == 200, f"/metrics for an allowed user answered {code}"
    counts = [line for line in body.splitlines()
              if line.startswith("controller_runtime_reconcile_total{") and 'result="success"' in line]
    # Every controller has its series from its start; those of the kinds with a sample counted
    # their reconciles (a controller of Kubernetes' own kind may have had nothing to reconcile).
    counted = [line for line in counts if float(line.rsplit(" ", 1)[1]) >= 1]
    assert len(counted) >= reconciled, body
    reviews = [w for w in emulator.writes if w[3] in ("tokenreviews", "subjectaccessreviews")]
    assert reviews, "the manager authorized /metrics without asking the API server"
    queried = dashboard_metrics(project_dir)
    if sys.platform != "linux":
        # The manager reads the process_* metrics from /proc, which only Linux has.
        queried = {name for name in queried if not name.startswith("process_")}
    served = {re.split(r"[{ ]", line, maxsplit=1)[0] for line in body.splitlines() if line and not line.startswith("#")}
    missing = sorted(queried - served)
    assert not missing, f"grafana/ queries metrics the manager does not serve: {missing}"
    if queried:
        print(f"   the {len(queried)} metrics the Grafana dashboards query are all served")
    print(f"   401 without a token or with an unknown one, 403 for a user not allowed; "
          f"{len(counts)} controllers' reconcile counts for an allowed one, {len(counted)} of them counting")


async def check_http2(manager: str, base_env: dict, tmp: pathlib.Path, ports: Ports) -> None:
    await e2e_webhooks.check_http2_refused(f"https://127.0.0.1:{ports.webhook}/convert",
                                           f"https://127.0.0.1:{ports.metrics}/metrics", ports.ca)
    # A replica with HTTP/2 on, which answers it: the check above can fail. It is a follower,
    # and serves webhooks as every replica does.
    webhook = free_port()
    replica = await Replica.start("h2", manager, {**base_env, "ENABLE_WEBHOOKS": "true"}, tmp,
                                  "--enable-http2", "--webhook-cert-path", str(ports.certs),
                                  "--webhook-port", str(webhook))
    try:
        deadline = asyncio.get_running_loop().time() + TIMEOUT
        while (await e2e_webhooks.http_version(f"https://127.0.0.1:{webhook}/convert", ports.ca))[2] == \
                e2e_webhooks.CURL_COULDNT_CONNECT:
            assert replica.process.returncode is None, f"the replica with --enable-http2 exited with {replica.process.returncode}"
            assert asyncio.get_running_loop().time() < deadline, f"not within {TIMEOUT} s: the replica's webhook port"
            await asyncio.sleep(0.2)
        await e2e_webhooks.check_http2_served(f"https://127.0.0.1:{webhook}/convert", ports.ca)
    finally:
        await replica.stop()
    print("   no HTTP/2 on the webhook and metrics ports; HTTP/2 on the webhook port of a replica with --enable-http2")


async def run_checks(emulator, client, project, project_dir, manager, ports: Ports, manager_bin: str,
                     base_env: dict, tmp: pathlib.Path) -> list:
    await step("the manager reports ready on /readyz",
               wait_http(f"http://127.0.0.1:{ports.probe}/readyz", 200, "/readyz answers 200", manager))
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
        SAMPLES[sample_file.name] = copy.deepcopy(sample)
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

    await step("/metrics serves only whom the API server authenticates and authorizes",
               check_metrics(emulator, ports, project_dir, len(samples)))
    samples_by_kind = {(s["apiVersion"], s["kind"]): s for s in SAMPLES.values()}
    await step("the webhooks over HTTPS, as the API server calls them",
               e2e_webhooks.check_webhooks(ports.webhook, ports.ca, project_dir, emulator, samples_by_kind,
                                           NAMESPACE))
    await step("HTTP/2 only with --enable-http2", check_http2(manager_bin, base_env, tmp, ports))
    if (project_dir / "config/webhook-self-certs").is_dir():
        await step("webhook certificates without cert-manager, made and shared by the replicas",
                   check_self_managed_certs(emulator, client, project_dir, manager_bin, base_env, tmp))

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
    return samples


LEASE = 3.0
RENEW_DEADLINE = 2.0
RETRY = 0.5
ELECTION_FLAGS = ["--leader-elect-lease-duration", f"{int(LEASE * 1000)}ms",
                  "--leader-elect-renew-deadline", f"{int(RENEW_DEADLINE * 1000)}ms",
                  "--leader-elect-retry-period", f"{int(RETRY * 1000)}ms"]


SELF_CERT_SECRET = "webhook-server-cert"
SELF_CERT_SERVICE = "webhook-service"


async def served_certificate(port: int, bundle: str) -> bytes:
    """The certificate the webhook port presents, verified against `bundle` for the Service's
    name as the API server verifies it; raises while the port is not up or does not verify."""
    context = ssl.create_default_context(cadata=bundle)
    _, writer = await asyncio.wait_for(asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname=f"{SELF_CERT_SERVICE}.{NAMESPACE}.svc"), 10)
    try:
        return writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        writer.close()


def bundles(emulator, converted: list[str]) -> list[str | None]:
    """The caBundle of every webhook configuration's webhook and converted CRD."""
    found = []
    for plural in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
        for configuration in emulator.list("admissionregistration.k8s.io", "v1", plural):
            found += [hook["clientConfig"].get("caBundle") for hook in configuration.get("webhooks", [])]
    for name in converted:
        crd = emulator.get("apiextensions.k8s.io", "v1", "customresourcedefinitions", None, name)
        found.append(crd["spec"]["conversion"]["webhook"]["clientConfig"].get("caBundle"))
    return found


async def check_self_managed_certs(emulator, client, project_dir: pathlib.Path, manager: str, base_env: dict,
                                   tmp: pathlib.Path) -> None:
    manifests = project_dir / "config/webhook/manifests.yaml"
    for configuration in yaml.safe_load_all(manifests.read_text()):
        if not configuration:
            continue
        for hook in configuration.get("webhooks", []):
            hook["clientConfig"]["service"].update(name=SELF_CERT_SERVICE, namespace=NAMESPACE)
        plural = configuration["kind"].lower() + "s"
        async with client.post(f"/apis/admissionregistration.k8s.io/v1/{plural}", json=configuration) as r:
            assert r.status == 201, (plural, r.status, await r.text())
    converted = [crd["metadata"]["name"] for crd in e2e_webhooks.conversion_crds(project_dir)]
    for name in converted:
        conversion = {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {
            "service": {"name": SELF_CERT_SERVICE, "namespace": NAMESPACE, "path": "/convert"}}}}
        async with client.patch(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}",
                                json={"spec": {"conversion": conversion}},
                                headers={"Content-Type": "application/merge-patch+json"}) as r:
            assert r.status == 200, (name, r.status, await r.text())
    assert bundles(emulator, converted), "no webhook configuration or converted CRD to give a CA bundle"
    assert all(bundle is None for bundle in bundles(emulator, converted))

    env = {**base_env, "ENABLE_WEBHOOKS": "true", "WEBHOOK_CERT_SECRET": SELF_CERT_SECRET,
           "WEBHOOK_SERVICE_NAME": SELF_CERT_SERVICE, "POD_NAMESPACE": NAMESPACE}
    ports = {name: free_port() for name in ("certs-a", "certs-b")}
    replicas = await asyncio.gather(*(
        Replica.start(name, manager, env, tmp, "--webhook-cert-path", str(tmp / name), "--webhook-port", str(port),
                      "--webhook-cert-check-interval", "500ms")
        for name, port in ports.items()))
    try:
        secret = await emulator.wait_for(lambda: emulator.get("", "v1", "secrets", NAMESPACE, SELF_CERT_SECRET),
                                         TIMEOUT, f"the Secret {SELF_CERT_SECRET}")
        bundle = base64.b64decode(secret["data"]["ca.crt"]).decode()
        serving = ssl.PEM_cert_to_DER_cert(base64.b64decode(secret["data"]["tls.crt"]).decode())
        loop = asyncio.get_running_loop()
        for replica, port in zip(replicas, ports.values()):
            deadline = loop.time() + TIMEOUT
            while True:
                assert replica.process.returncode is None, f"{replica.name} exited with {replica.process.returncode}"
                try:
                    served = await served_certificate(port, bundle)
                    break
                except (OSError, asyncio.TimeoutError) as error:
                    assert loop.time() < deadline, f"not within {TIMEOUT} s: {replica.name}'s webhook port: {error}"
                    await asyncio.sleep(0.2)
            assert served == serving, f"{replica.name} serves another certificate than the Secret's"
        secrets = emulator.list("", "v1", "secrets")
        assert [s["metadata"]["name"] for s in secrets] == [SELF_CERT_SECRET], secrets
        assert "PRIVATE KEY" not in bundle, "the CA bundle holds a key"
        assert bundles(emulator, converted) == [secret["data"]["ca.crt"]] * len(bundles(emulator, converted))

        # Someone applies the first configuration again, without its caBundle.
        for plural in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
            for configuration in emulator.list("admissionregistration.k8s.io", "v1", plural):
                path = f"/apis/admissionregistration.k8s.io/v1/{plural}/{configuration['metadata']['name']}"
                remove = [{"op": "remove", "path": "/webhooks/0/clientConfig/caBundle"}]
                async with client.patch(path, json=remove, headers={"Content-Type": "application/json-patch+json"}) as r:
                    assert r.status == 200, (path, r.status, await r.text())
                break
        await emulator.wait_for(lambda: bundles(emulator, converted) == [secret["data"]["ca.crt"]] * len(
            bundles(emulator, converted)), TIMEOUT, "the CA bundle that was edited away, set again")
        assert emulator.get("", "v1", "secrets", NAMESPACE, SELF_CERT_SECRET) == secret, "the Secret changed"
    finally:
        for replica in replicas:
            await replica.stop()
    print(f"   two replicas serve one certificate from the Secret {SELF_CERT_SECRET}; its CA is the caBundle of "
          f"{len(bundles(emulator, converted))} webhooks and converted CRDs, and is set again when edited away")


class Replica:
    """A manager process with a kubeconfig of its own, whose token names it to the emulator."""

    def __init__(self, name: str, process, token: str) -> None:
        self.name, self.process, self.token = name, process, token

    @classmethod
    async def start(cls, name: str, manager: str, base_env: dict, tmp: pathlib.Path, *flags: str) -> "Replica":
        config = json.loads(pathlib.Path(base_env["KUBECONFIG"]).read_text())
        token = f"token-{name}"
        config["users"][0]["user"]["token"] = token
        kubeconfig = tmp / f"kubeconfig-{name}"
        kubeconfig.write_text(json.dumps(config))
        env = {**base_env, "KUBECONFIG": str(kubeconfig), "POD_NAME": name, "RUST_LOG": "warn"}
        process = await asyncio.create_subprocess_exec(
            manager, "--leader-elect", *ELECTION_FLAGS, "--metrics-bind-address", "0",
            "--health-probe-bind-address", f"127.0.0.1:{free_port()}", *flags, env=env)
        return cls(name, process, token)

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()


def holder(emulator, lease_name: str) -> str:
    lease = emulator.get("coordination.k8s.io", "v1", "leases", NAMESPACE, lease_name)
    identity = ((lease or {}).get("spec") or {}).get("holderIdentity") or ""
    return identity.split("_", 1)[0]


async def quiet(emulator, token: str, seconds: float) -> None:
    """Waits until the replica of `token` has written nothing but its Lease for `seconds`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + TIMEOUT
    while True:
        last = max((w[0] for w in emulator.writes if w[1] == token and w[3] != "leases"), default=0.0)
        if loop.time() - last >= seconds:
            return
        if loop.time() > deadline:
            raise AssertionError(f"the replica of {token} kept writing for {TIMEOUT} s")
        await asyncio.sleep(0.1)


def writes_by(emulator, token: str, since: float = 0.0, leases: bool = False) -> list:
    return [w for w in emulator.writes if w[1] == token and w[0] >= since and (leases or w[3] != "leases")]


async def leader_election(emulator, client, manager, base_env, tmp, sample, round_) -> None:
    file, group, version, plural, namespace, _, path = sample
    leases = emulator.list("coordination.k8s.io", "v1", "leases")
    lease_name = leases[0]["metadata"]["name"]
    loop = asyncio.get_running_loop()
    print(f"-- leader election, round {round_ + 1}: two replicas", flush=True)
    a = await Replica.start(f"a{round_}", manager, base_env, tmp)
    b = await Replica.start(f"b{round_}", manager, base_env, tmp)
    c = None
    replicas = {a.name: a, b.name: b}
    try:
        first = await emulator.wait_for(lambda: replicas.get(holder(emulator, lease_name)), TIMEOUT,
                                        "a replica takes the Lease")
        other = b if first is a else a
        # An object to reconcile: only the leader may write to it.
        obj = {**sample_object(file), "metadata": {"name": f"le-{round_}"}}
        async with client.post(path, json=obj) as r:
            assert r.status == 201, (r.status, await r.text())
        await emulator.wait_for(lambda: (emulator.get(group, version, plural, namespace, f"le-{round_}") or {})
                                .get("metadata", {}).get("finalizers"), TIMEOUT, "the leader adds its finalizer")
        assert writes_by(emulator, first.token), "the leader wrote nothing"
        assert not writes_by(emulator, other.token), f"the follower wrote: {writes_by(emulator, other.token)}"

        print(f"   {first.name} leads; kill -9 it", flush=True)
        last_renewal = max(w[0] for w in writes_by(emulator, first.token, leases=True) if w[3] == "leases")
        first.process.kill()
        killed = loop.time()
        await first.process.wait()
        await emulator.wait_for(lambda: holder(emulator, lease_name) == other.name, LEASE + RETRY + 3,
                                f"{other.name} takes the Lease over")
        first_take = next(w[0] for w in emulator.writes if w[1] == other.token and w[3] == "leases" and w[0] >= killed
                          and w[2] == "PUT")
        assert first_take - last_renewal >= LEASE - 0.1, \
            f"{other.name} took the Lease {first_take - last_renewal:.2f} s after its last renewal, before it expired"
        assert first_take - killed <= LEASE + 2 * RETRY + 0.5, \
            f"{other.name} took the Lease {first_take - killed:.2f} s after the kill"
        print(f"   {other.name} took over {first_take - killed:.2f} s after the kill, "
              f"{first_take - last_renewal:.2f} s after the last renewal", flush=True)

        # The new leader acts: it reconciles an object of its own. Only then is it paused: one
        # paused before it learned that it leads is a candidate, which has nothing to stop.
        second = f"le-{round_}-after-kill"
        async with client.post(path, json={**sample_object(file), "metadata": {"name": second}}) as r:
            assert r.status == 201, (r.status, await r.text())
        await emulator.wait_for(lambda: any(w[4] == second for w in writes_by(emulator, other.token)), TIMEOUT,
                                f"{other.name} reconciles {second}")
        await emulator.wait_for(lambda: (emulator.get(group, version, plural, namespace, second) or {})
                                .get("metadata", {}).get("finalizers"), TIMEOUT, f"{second} gets its finalizer")

        # Paused while idle: a request sent just before SIGSTOP may still reach the API server
        # after SIGCONT, and no fence can take back what has been sent ...
        await quiet(emulator, other.token, 1.0)
        # ... except for one reconcile, paused while it waits for the answer to its status
        # write: resumed, it goes on, and the event it would publish next must not go out.
        slow = f"le-{round_}-in-flight"
        emulator.delays[other.token, slow] = 1.0
        async with client.post(path, json={**sample_object(file), "metadata": {"name": slow}}) as r:
            assert r.status == 201, (r.status, await r.text())
        await emulator.wait_for(lambda: any(w[4] == slow and w[5] == "status" for w in writes_by(emulator, other.token)),
                                TIMEOUT, f"{other.name} writes the status of {slow}")
        print(f"   SIGSTOP {other.name} in the middle of a reconcile; a third replica takes over", flush=True)
        other.process.send_signal(signal.SIGSTOP)
        c = await Replica.start(f"c{round_}", manager, base_env, tmp)
        await emulator.wait_for(lambda: holder(emulator, lease_name) == c.name, LEASE + RETRY + 5,
                                f"{c.name} takes the Lease over from the paused {other.name}")
        # Something new for the paused replica to see once it resumes: its watch brings it a
        # new object, which it must not reconcile.
        third = f"le-{round_}-while-paused"
        async with client.post(path, json={**sample_object(file), "metadata": {"name": third}}) as r:
            assert r.status == 201, (r.status, await r.text())
        await emulator.wait_for(lambda: any(w[4] == third for w in writes_by(emulator, c.token)), TIMEOUT,
                                f"{c.name} reconciles {third}")
        resumed = loop.time()
        other.process.send_signal(signal.SIGCONT)
        try:
            code = await asyncio.wait_for(other.process.wait(), 5)
        except TimeoutError:
            raise AssertionError(f"{other.name} kept running after it was resumed past its renew deadline") from None
        assert code != 0, f"{other.name} exited with 0 after losing its Lease"
        acted = writes_by(emulator, other.token, since=resumed)
        assert not acted, f"{other.name} wrote after it was resumed: {acted}"
        assert holder(emulator, lease_name) == c.name, "the Lease went back to the paused replica"
        print(f"   {other.name} resumed and exited with {code}, writing nothing", flush=True)
        for name in (f"le-{round_}", second, slow, third):
            async with client.delete(f"{path}/{name}") as r:
                assert r.status in (200, 202), (r.status, await r.text())
            await emulator.wait_for(lambda: emulator.get(group, version, plural, namespace, name) is None,
                                    TIMEOUT, f"{c.name} cleans up {name}")
        c.process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(c.process.wait(), 40)
        assert code == 0, f"{c.name} exited with {code} after SIGTERM"
    finally:
        for replica in (a, b, c):
            if replica is not None:
                if replica.process.returncode is None:
                    replica.process.send_signal(signal.SIGCONT)
                await replica.stop()


SAMPLES: dict[str, dict] = {}


def sample_object(file: str) -> dict:
    return copy.deepcopy(SAMPLES[file])


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
        conditions = ((obj or {}).get("status") or {}).get("conditions") or []
        # A condition past the `Unknown` a kind that runs an image reports as it starts.
        if obj and obj["metadata"].get("finalizers") and any(c["status"] != "Unknown" for c in conditions):
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
