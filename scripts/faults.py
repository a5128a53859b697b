"""The fault tier: a project's manager, run as a process, against an API server that misbehaves.

The emulated API server of the project (`hack/kube_emulator.py`) is taught to inject faults:
status codes with headers, hangs, late answers applied after the client left, dropped
connections, watches that close, are cut or fail, a stolen Lease, an object that does not
decode. Each case starts a fresh emulator and manager, injects its faults, and asserts what the
emulator's request log shows: no write after the Lease changed hands, at most N reconciles in
flight, no request older than its timeout, watch rates bounded, the shutdown order.

    scripts/faults.py --manager target/debug/manager --project testdata/project-namespaced

`--pending 10000` also reconciles that many objects present at start and prints the manager's
peak RSS and open descriptors (build the manager with `--release` to measure what is deployed).
Run it with the Python of the project's e2e virtualenv (kmock, PyYAML). The project must have
one namespaced kind with a controller whose spec has an integer `size` (the golden
`project-namespaced`). Every wait has a timeout; the whole tier takes about three minutes.
It prints `faults: N passed, M failed` and exits non-zero when a case failed.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import pathlib
import signal
import socket
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

sys.dont_write_bytecode = True

NAMESPACE = "default"
WRITES = ("POST", "PUT", "PATCH", "DELETE")
# Leader election timings of every case: a Lease of 3 s, a renew deadline of 2 s, a try every
# half second.
LEADER_FLAGS = ["--leader-elect", "--leader-elect-lease-duration=3s",
                "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=500ms"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def emulator_class(project: pathlib.Path):
    """The project's emulator, extended with faults."""
    sys.path.insert(0, str(project / "hack"))
    import aiohttp.web
    from kube_emulator import KubeEmulator, status

    @dataclass
    class Entry:
        """One request as the emulator received it."""
        start: float
        method: str
        plural: str | None
        name: str | None
        subresource: str | None
        watch: bool
        query: dict
        end: float | None = None
        fault: str | None = None

        @property
        def write(self) -> bool:
            return self.method in WRITES and not self.watch

    @dataclass
    class Rule:
        """A fault: `act` answers the requests `matches` selects, `times` times (-1: always)."""
        matches: Callable[[Entry], bool]
        act: Callable[[Any, Any, Entry], Awaitable[Any]]
        name: str
        times: int = 1
        fired: list = field(default_factory=list)

    class FaultyEmulator(KubeEmulator):
        def __attrs_post_init__(self) -> None:
            super().__attrs_post_init__()
            self.rules: list[Rule] = []
            self.log: list[Entry] = []
            self.in_flight = 0
            self.most_in_flight = 0
            self.open_watches: list[Any] = []
            self.release = asyncio.Event()

        def fault(self, matches, act, name: str, times: int = 1) -> Rule:
            rule = Rule(matches, act, name, times)
            self.rules.append(rule)
            return rule

        async def _handle(self, request):
            resource = request.resource
            method = str(request.method.value if hasattr(request.method, "value") else request.method).upper()
            entry = Entry(start=time.monotonic(), method=method,
                          plural=resource.plural if resource else None, name=request.name,
                          subresource=request.subresource,
                          watch=request.params.get("watch") in ("true", "1"), query=dict(request.params))
            self.log.append(entry)
            # Reconciles in flight show as the requests to the project's kind in flight.
            counted = not entry.watch and entry.plural == "captains"
            if counted:
                self.in_flight += 1
                self.most_in_flight = max(self.most_in_flight, self.in_flight)
            try:
                for rule in self.rules:
                    if rule.times != 0 and rule.matches(entry):
                        rule.times -= 1
                        rule.fired.append(entry)
                        entry.fault = rule.name
                        return await rule.act(self, request, entry)
                if entry.watch:
                    self.open_watches.append(request._raw_request)
                try:
                    return await super()._handle(request)
                except ConnectionResetError:
                    # A watch whose connection a case dropped.
                    return aiohttp.web.Response(status=500)
            finally:
                entry.end = time.monotonic()
                if counted:
                    self.in_flight -= 1

        def cut_watches(self) -> None:
            """Drops the connection of every open watch."""
            for raw in self.open_watches:
                if raw.transport is not None:
                    raw.transport.close()
            self.open_watches.clear()

        def lease(self) -> dict | None:
            leases = self.list("coordination.k8s.io", "v1", "leases")
            return leases[0] if leases else None

        async def steal_lease(self) -> float:
            """Gives the Lease to another holder, as a replica that took over would; returns when."""
            (key,) = [k for k in self.store if k[2] == "leases"]
            lease = self.store[key]
            lease["spec"]["holderIdentity"] = "thief"
            lease["spec"]["renewTime"] = lease["spec"]["acquireTime"] = now_micro()
            self.bump(lease)
            await self.record(key[:3], "MODIFIED", lease)
            return time.monotonic()

        async def put(self, obj: dict) -> None:
            """Stores `obj` as if created through the API."""
            group, version = obj["apiVersion"].split("/")
            meta = obj["metadata"]
            meta.update(uid=f"uid-{meta['name']}", creationTimestamp="2026-01-01T00:00:00Z", generation=1)
            self.bump(obj)
            self.store[group, version, "captains", meta["namespace"], meta["name"]] = obj
            await self.record((group, version, "captains"), "ADDED", obj)

        def captains(self) -> list[dict]:
            return self.list("ship.example.org", "v1", "captains")

        def reconciled(self) -> int:
            """How many captains are reconciled, read in place (no copies of the store)."""
            return sum(1 for key, obj in self.store.items() if key[2] == "captains" and ready(obj))

    # The faults' answers.
    def answer(code: int, headers: dict | None = None):
        async def act(emulator, request, entry):
            response = status(code, "Fault", f"the fault tier answers {code}")
            response.headers.update(headers or {})
            return response
        return act

    async def hang(emulator, request, entry):
        await emulator.release.wait()
        return status(503, "Fault", "released")

    def late(seconds: float):
        async def act(emulator, request, entry):
            # Applied even when the client has left, as a real API server does.
            await asyncio.sleep(seconds)
            return await KubeEmulator._handle(emulator, request)
        return act

    async def close_at_once(emulator, request, entry):
        response = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request._raw_request)
        return response

    async def cut_mid_line(emulator, request, entry):
        response = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request._raw_request)
        await response.write(b'{"type":"ADDED","object":{"apiVersion":"ship.exa')
        request._raw_request.transport.close()
        return response

    async def gone(emulator, request, entry):
        response = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request._raw_request)
        event = {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                             "status": "Failure", "message": "too old resource version",
                                             "reason": "Expired", "code": 410}}
        await response.write(json.dumps(event).encode() + b"\n")
        return response

    async def drop(emulator, request, entry):
        request._raw_request.transport.close()
        return status(500, "Fault", "dropped")

    FaultyEmulator.answer, FaultyEmulator.hang, FaultyEmulator.late = staticmethod(answer), staticmethod(hang), staticmethod(late)
    FaultyEmulator.close_at_once, FaultyEmulator.cut_mid_line = staticmethod(close_at_once), staticmethod(cut_mid_line)
    FaultyEmulator.gone, FaultyEmulator.drop = staticmethod(gone), staticmethod(drop)
    return FaultyEmulator


def now_micro() -> str:
    import datetime
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def captain(name: str, size: Any = 1) -> dict:
    return {"apiVersion": "ship.example.org/v1", "kind": "Captain",
            "metadata": {"name": name, "namespace": NAMESPACE}, "spec": {"size": size}}


def ready(obj: dict | None) -> bool:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


class Failed(AssertionError):
    pass


def check(condition: bool, what: str) -> None:
    if not condition:
        raise Failed(what)


async def eventually(predicate, timeout: float, what: str, step: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return result
        if time.monotonic() > deadline:
            raise Failed(f"not within {timeout} s: {what}")
        await asyncio.sleep(step)


class Run:
    """One case: an emulator with the project's CRD and a manager process against it."""

    def __init__(self, args, emulator_type, tmp: pathlib.Path, name: str) -> None:
        self.args, self.emulator, self.tmp, self.name = args, emulator_type(), tmp, name
        self.manager = None
        self.probe, self.metrics = free_port(), free_port()
        self.log_path = tmp / f"{name}.log"

    async def install(self, client) -> None:
        import yaml
        for crd_file in sorted((self.args.project / "config/crd/bases").glob("*.yaml")):
            for crd in yaml.safe_load_all(crd_file.read_text()):
                async with client.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd) as r:
                    check(r.status == 201, f"the CRD of {crd_file} installs: {r.status}")

    async def start(self, api: str, *flags: str, leader: list[str] = LEADER_FLAGS) -> None:
        kubeconfig = self.tmp / "kubeconfig"
        kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "emulator",
            "clusters": [{"name": "emulator", "cluster": {"server": api}}],
            "contexts": [{"name": "emulator", "context": {"cluster": "emulator", "user": "test", "namespace": NAMESPACE}}],
            "users": [{"name": "test", "user": {"token": "test"}}],
        }))
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "POD_NAMESPACE": NAMESPACE, "POD_NAME": "manager-0",
               "WATCH_NAMESPACE": NAMESPACE, "ENABLE_WEBHOOKS": "false", "RUST_LOG": "info"}
        self.log_file = self.log_path.open("wb")
        self.manager = await asyncio.create_subprocess_exec(
            str(self.args.manager), *leader,
            "--health-probe-bind-address", f"127.0.0.1:{self.probe}",
            "--metrics-bind-address", f"127.0.0.1:{self.metrics}", "--metrics-secure=false",
            *flags, env=env, stdout=self.log_file, stderr=self.log_file)

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")

    async def get(self, path: str, port: int | None = None) -> tuple[int, str]:
        import aiohttp
        try:
            async with aiohttp.ClientSession() as session:
                async with session.get(f"http://127.0.0.1:{port or self.probe}{path}",
                                       timeout=aiohttp.ClientTimeout(total=2)) as response:
                    return response.status, await response.text()
        except (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError):
            return 0, ""

    async def metric(self, line_start: str) -> float | None:
        code, text = await self.get("/metrics", self.metrics)
        for line in text.splitlines():
            if line.startswith(line_start):
                return float(line.rsplit(" ", 1)[1])
        return None

    async def leading(self) -> None:
        await eventually(lambda: (self.emulator.lease() or {}).get("spec", {}).get("holderIdentity", "").startswith("manager-0"),
                         20, "the manager takes the Lease")
        await eventually(self.is_ready, 20, "/readyz answers 200")

    async def is_ready(self) -> bool:
        """Whether /readyz passes with the controller's own check in it (before the controller
        registers its check, /readyz has nothing to fail)."""
        code, body = await self.get("/readyz")
        return code == 200 and "[+]ship-captain ok" in body

    async def reconciled(self, name: str, timeout: float = 20) -> None:
        await eventually(lambda: ready(self.emulator.get("ship.example.org", "v1", "captains", NAMESPACE, name)),
                         timeout, f"captain {name} is reconciled")

    async def exited(self, timeout: float) -> int:
        try:
            return await asyncio.wait_for(self.manager.wait(), timeout)
        except asyncio.TimeoutError:
            raise Failed(f"the manager did not exit within {timeout} s") from None

    def writes_since(self, since: float) -> list:
        return [e for e in self.emulator.log if e.write and e.plural != "leases" and e.start >= since]

    def peak_rss(self) -> int:
        """The manager's peak resident memory so far, in KiB (VmHWM)."""
        return self.status_kib("VmHWM")

    def rss(self) -> int:
        """The manager's resident memory now, in KiB (VmRSS)."""
        return self.status_kib("VmRSS")

    def status_kib(self, field_name: str) -> int:
        try:
            for line in pathlib.Path(f"/proc/{self.manager.pid}/status").read_text().splitlines():
                if line.startswith(f"{field_name}:"):
                    return int(line.split()[1])
        except OSError:
            pass
        return 0

    def open_fds(self) -> int:
        try:
            return len(os.listdir(f"/proc/{self.manager.pid}/fd"))
        except OSError:
            return 0

    async def stop(self) -> None:
        if self.manager and self.manager.returncode is None:
            self.manager.kill()
            await self.manager.wait()
        self.emulator.release.set()
        if getattr(self, "log_file", None):
            self.log_file.close()


# -- the cases ------------------------------------------------------------------------------
# Each takes a Run whose emulator serves the CRD and whose manager is not started yet, and the
# API server's address.

def status_patch(entry) -> bool:
    return entry.method == "PATCH" and entry.plural == "captains" and entry.subresource == "status"


def list_of_captains(entry) -> bool:
    return entry.method == "GET" and entry.plural == "captains" and not entry.watch and entry.name is None \
        and entry.query.get("limit") != "1"


def watch_of_captains(entry) -> bool:
    return entry.watch and entry.plural == "captains"


async def lease_moves_during_a_retry_wait(run: Run, api: str) -> None:
    """Finding 1: a status PATCH answered 503 Retry-After: 8, then the Lease taken by another
    holder during the wait: the PATCH is never sent again, and the manager exits. With
    client-go's default timings (15 s, 10 s, 2 s) the controllers have time to finish before
    the Lease could expire: the wait must end when the fence closes, not when they stop."""
    rule = run.emulator.fault(status_patch, run.emulator.answer(503, {"Retry-After": "8"}), "503 Retry-After: 8")
    await run.start(api, leader=["--leader-elect"])
    await run.leading()
    await run.emulator.put(captain("c-0"))
    await eventually(lambda: rule.fired, 20, "the status PATCH is answered 503 Retry-After: 8")
    await asyncio.sleep(0.3)
    stolen = await run.emulator.steal_lease()
    code = await run.exited(20)
    writes = run.writes_since(stolen)
    check(not writes, f"writes after the Lease changed hands: {[(e.method, e.plural, e.subresource) for e in writes]}")
    check(code != 0, f"the manager that lost its Lease exits with an error, not {code}")


async def a_paused_leader_resumed_past_its_deadline_sends_nothing(run: Run, api: str) -> None:
    """Finding 1, paused: SIGSTOP during a Retry-After wait, the Lease taken meanwhile, SIGCONT
    past the renew deadline: nothing but the Lease is written after the resume."""
    rule = run.emulator.fault(status_patch, run.emulator.answer(503, {"Retry-After": "2"}), "503 Retry-After: 2")
    await run.start(api)
    await run.leading()
    await run.emulator.put(captain("c-0"))
    await eventually(lambda: rule.fired, 20, "the status PATCH is answered 503 Retry-After: 2")
    run.manager.send_signal(signal.SIGSTOP)
    stolen = await run.emulator.steal_lease()
    await asyncio.sleep(4)
    run.manager.send_signal(signal.SIGCONT)
    await run.exited(10)
    writes = run.writes_since(stolen)
    check(not writes, f"writes after the resume: {[(e.method, e.plural, e.subresource) for e in writes]}")


async def pending_objects_are_reconciled_a_few_at_a_time(run: Run, api: str) -> None:
    """Finding 2: 300 objects present at start against a slow API server (every status write
    answered after 0.3 s): at most --max-concurrent-reconciles (10) in flight, every object
    reconciled, and the open file descriptors bounded."""
    for i in range(300):
        await run.emulator.put(captain(f"c-{i}"))
    run.emulator.fault(status_patch, run.emulator.late(0.3), "late 0.3 s", times=-1)
    await run.start(api)
    await run.leading()
    peak_fds = 0

    def done() -> bool:
        nonlocal peak_fds
        peak_fds = max(peak_fds, run.open_fds())
        return all(ready(c) for c in run.emulator.captains())
    await eventually(done, 90, "every one of 300 objects is reconciled", step=0.1)
    most = run.emulator.most_in_flight
    check(most <= 10, f"{most} requests of reconciles in flight at once; at most 10")
    check(peak_fds <= 64, f"{peak_fds} open file descriptors at the peak; at most 64")
    print(f"   {most} requests in flight at most, {peak_fds} open descriptors at the peak")


async def an_unanswered_request_times_out_and_is_retried(run: Run, api: str) -> None:
    """Finding 3: a status PATCH left unanswered: it fails at --api-request-timeout (2 s), the
    object is retried with its backoff and reconciled, a spec change is reconciled, and SIGTERM
    ends the manager cleanly."""
    rule = run.emulator.fault(status_patch, run.emulator.hang, "hang")
    await run.start(api, "--api-request-timeout=2s")
    await run.leading()
    await run.emulator.put(captain("c-0"))
    await eventually(lambda: rule.fired, 20, "the status PATCH hangs")
    hung = rule.fired[0].start
    await run.reconciled("c-0", 10)
    retried = [e for e in run.emulator.log if status_patch(e) and e.start > hung]
    check(retried and retried[0].start - hung < 4,
          f"the PATCH is sent again within 4 s of the one that hung: {[round(e.start - hung, 2) for e in retried]}")
    obj = run.emulator.store["ship.example.org", "v1", "captains", NAMESPACE, "c-0"]
    obj["spec"]["size"] = 2
    obj["metadata"]["generation"] = 2
    run.emulator.bump(obj)
    await run.emulator.record(("ship.example.org", "v1", "captains"), "MODIFIED", obj)
    await eventually(lambda: (run.emulator.get("ship.example.org", "v1", "captains", NAMESPACE, "c-0")["status"]
                              .get("observedGeneration")) == 2, 10, "the spec change is reconciled")
    run.manager.send_signal(signal.SIGTERM)
    check(await run.exited(10) == 0, "SIGTERM ends the manager with 0")


async def a_503_without_retry_after_reaches_the_backoff_and_the_metrics(run: Run, api: str) -> None:
    """Findings 4 and 11: three 503s without Retry-After: each one reaches the reconcile (the
    per-object backoff spaces the attempts, 0.5 s then 1 s), the error metric counts them, and
    the client's and the queue's metrics show."""
    rule = run.emulator.fault(status_patch, run.emulator.answer(503), "503", times=3)
    await run.start(api)
    await run.leading()
    await run.emulator.put(captain("c-0"))
    await run.reconciled("c-0", 20)
    times = [e.start for e in run.emulator.log if status_patch(e)]
    gaps = [round(b - a, 2) for a, b in zip(times, times[1:])]
    check(len(times) == 4, f"three failed PATCHes and one that succeeds, not {len(times)}")
    check(all(gap >= 0.4 for gap in gaps), f"the retries wait for the per-object backoff: {gaps}")
    errors = await run.metric('controller_runtime_reconcile_errors_total{controller="ship-captain"}')
    check(errors is not None and errors >= 3, f"controller_runtime_reconcile_errors_total counts 3: {errors}")
    answered = await run.metric('rest_client_requests_total{code="503",method="PATCH"}')
    check(answered == 3, f"rest_client_requests_total counts the 503s: {answered}")
    for name in ('workqueue_depth{name="ship-captain"}', 'workqueue_adds_total{name="ship-captain"}',
                 'workqueue_retries_total{name="ship-captain"}'):
        check(await run.metric(name) is not None, f"/metrics has {name}")


def watch_case(act_name: str, doc: str):
    async def case(run: Run, api: str) -> None:
        await run.start(api)
        await run.leading()
        act = getattr(run.emulator, act_name)
        run.emulator.fault(watch_of_captains, act, act_name, times=-1)
        run.emulator.cut_watches()
        started = time.monotonic()
        await asyncio.sleep(6)
        watches = [e for e in run.emulator.log if watch_of_captains(e) and e.start >= started]
        check(len(watches) <= 8, f"{len(watches)} watches in 6 s; a backoff of 0.8 s doubling allows at most 8")
        check(run.manager.returncode is None, "the manager goes on")
        print(f"   {len(watches)} watches in 6 s")
    case.__name__ = f"watches_that_{act_name}_back_off"
    case.__doc__ = doc
    return case


async def shutdown_stops_the_controllers_before_the_servers(run: Run, api: str) -> None:
    """Finding 6: SIGTERM while a status write takes 4 s: the probes answer during the grace,
    the write completes, then the Lease is released and the manager exits 0."""
    rule = run.emulator.fault(status_patch, run.emulator.late(4), "late 4 s")
    await run.start(api)
    await run.leading()
    await run.emulator.put(captain("c-0"))
    await eventually(lambda: rule.fired, 20, "the status PATCH is under way")
    run.manager.send_signal(signal.SIGTERM)
    await asyncio.sleep(1)
    check((await run.get("/healthz"))[0] == 200, "/healthz answers during the grace")
    check((await run.get("/readyz"))[0] == 200, "/readyz answers during the grace")
    check(await run.exited(15) == 0, "the manager exits 0")
    patched = rule.fired[0].end
    releases = [e for e in run.emulator.log if e.plural == "leases" and e.method == "PUT" and e.start >= patched]
    check(releases, "the Lease is released after the write in flight completed")
    check(not (run.emulator.lease() or {}).get("spec", {}).get("holderIdentity"), "the Lease is released")


async def a_start_that_cannot_sync_ends_the_manager(run: Run, api: str) -> None:
    """Finding 7: an object that does not decode into the type: /readyz 503, then after
    --cache-sync-timeout the manager exits with an error that names the kind and the decode
    error, and leaves the Lease to the others."""
    await run.emulator.put(captain("bad", size="big"))
    await run.start(api, "--cache-sync-timeout=4s")
    await eventually(lambda: _not_ready(run), 20, "/readyz answers 503 while the cache cannot sync")
    code = await run.exited(15)
    check(code != 0, f"the manager exits with an error, not {code}")
    logs = run.logs()
    check("the cache of Captain" in logs and "did not sync within 4s" in logs, f"the log names the kind:\n{logs[-2000:]}")
    check("invalid type: string \"big\"" in logs, f"the log names the decode error:\n{logs[-2000:]}")
    check(not run.emulator.lease()["spec"].get("holderIdentity"), "the Lease is released: every controller stopped")


async def a_relist_that_cannot_sync_turns_readiness_off_and_ends_the_manager(run: Run, api: str) -> None:
    """Finding 7, after a relist: the watch says 410 Gone and the relist holds an object that
    does not decode: /readyz turns 503, then the manager exits with the error."""
    await run.start(api, "--cache-sync-timeout=4s")
    await run.leading()
    await run.emulator.put(captain("bad", size="big"))
    run.emulator.fault(watch_of_captains, run.emulator.gone, "410 Gone")
    run.emulator.cut_watches()
    await eventually(lambda: _not_ready(run), 15, "/readyz turns 503 during the failing relist")
    code = await run.exited(15)
    check(code != 0, f"the manager exits with an error, not {code}")
    check("after a relist" in run.logs(), "the log says the relist did not sync")


async def _not_ready(run: Run) -> bool:
    code, body = await run.get("/readyz")
    return code == 503 and "[-]ship-captain not ready" in body


async def the_grace_ends_without_releasing_a_lease_with_a_write_in_flight(run: Run, api: str) -> None:
    """Finding 8: a status write that never ends, and SIGTERM with a grace of 2 s: the manager
    gives up on the controller and exits 1, and the Lease still names it (left to expire)."""
    rule = run.emulator.fault(status_patch, run.emulator.hang, "hang")
    await run.start(api, "--graceful-shutdown-timeout=2s", "--api-request-timeout=60s")
    await run.leading()
    await run.emulator.put(captain("c-0"))
    await eventually(lambda: rule.fired, 20, "the status PATCH hangs")
    run.manager.send_signal(signal.SIGTERM)
    code = await run.exited(10)
    check(code != 0, f"the manager that abandoned a controller exits with an error, not {code}")
    holder = run.emulator.lease()["spec"].get("holderIdentity") or ""
    check(holder.startswith("manager-0"), f"the Lease is left to expire, not released: holder {holder!r}")


async def a_long_retry_after_is_capped(run: Run, api: str) -> None:
    """Finding 9: the first LIST answered 429 Retry-After: 3600: it is sent again within the
    cap (10 s), and the object is reconciled."""
    rule = run.emulator.fault(list_of_captains, run.emulator.answer(429, {"Retry-After": "3600"}), "429 Retry-After: 3600")
    await run.emulator.put(captain("c-0"))
    await run.start(api)
    await eventually(lambda: rule.fired, 20, "the LIST is answered 429")
    await run.reconciled("c-0", 15)
    lists = [e.start for e in run.emulator.log if list_of_captains(e)]
    check(10 - 0.5 <= lists[1] - lists[0] <= 12, f"the LIST is sent again after 10 s: {round(lists[1] - lists[0], 2)} s")


async def readiness_follows_a_broken_watch(run: Run, api: str) -> None:
    """Finding 10: once ready, every watch answered 500: /readyz turns 503; when the watches
    are answered again, 200."""
    await run.start(api)
    await run.leading()
    rule = run.emulator.fault(watch_of_captains, run.emulator.answer(500), "500", times=-1)
    run.emulator.cut_watches()
    await eventually(lambda: _not_ready(run), 30, "/readyz turns 503 while the watch fails (after 10 s)")
    rule.times = 0
    await eventually(run.is_ready, 40, "/readyz answers 200 once the watch is back")


# Held cases: what worked before must keep working.

async def lists_answered_500_back_off(run: Run, api: str) -> None:
    """Held: LISTs answered 500 are retried with backoff, and the cache then syncs."""
    rule = run.emulator.fault(list_of_captains, run.emulator.answer(500), "500", times=3)
    await run.emulator.put(captain("c-0"))
    await run.start(api)
    await run.reconciled("c-0", 30)
    lists = [e.start for e in run.emulator.log if list_of_captains(e)]
    check(len(rule.fired) == 3 and lists[3] - lists[0] >= 1, f"three failed LISTs over at least 1 s: {[round(t - lists[0], 2) for t in lists]}")


async def a_watch_gone_410_relists_and_goes_on(run: Run, api: str) -> None:
    """Held: a watch answered 410 Gone relists, and a new object is reconciled."""
    await run.start(api)
    await run.leading()
    lists_before = len([e for e in run.emulator.log if list_of_captains(e)])
    run.emulator.fault(watch_of_captains, run.emulator.gone, "410 Gone")
    run.emulator.cut_watches()
    await eventually(lambda: len([e for e in run.emulator.log if list_of_captains(e)]) > lists_before, 10, "a relist")
    await run.emulator.put(captain("c-new"))
    await run.reconciled("c-new", 15)


async def a_dropped_connection_is_retried_by_the_reconcile(run: Run, api: str) -> None:
    """Held: a status write whose connection drops fails the reconcile, which is retried."""
    run.emulator.fault(status_patch, run.emulator.drop, "dropped")
    await run.start(api)
    await run.leading()
    await run.emulator.put(captain("c-0"))
    await run.reconciled("c-0", 15)


async def a_leader_whose_api_server_hangs_steps_down_at_the_renew_deadline(run: Run, api: str) -> None:
    """Held: every Lease request hangs while a status write is retried every second: the
    leader gives up at its renew deadline, exits with an error, and writes nothing after."""
    await run.start(api)
    await run.leading()
    retrying = run.emulator.fault(status_patch, run.emulator.answer(503, {"Retry-After": "1"}), "503 Retry-After: 1",
                                  times=-1)
    await run.emulator.put(captain("c-0"))
    await eventually(lambda: len(retrying.fired) >= 2, 20, "the status PATCH is being retried")
    hung = time.monotonic()
    run.emulator.fault(lambda e: e.plural == "leases", run.emulator.hang, "hang", times=-1)
    code = await run.exited(10)
    check(code != 0, "the leader exits with an error")
    late = run.writes_since(hung + 2.5)
    check(not late, f"writes after the renew deadline: {[(e.method, e.plural, e.subresource) for e in late]}")


async def a_bookmark_moves_the_next_watch(run: Run, api: str) -> None:
    """Held: a watch that delivered a bookmark is resumed from the bookmark's resourceVersion."""
    await run.start(api)
    await run.leading()
    revision = run.emulator.revision + 1000

    async def bookmark(emulator, request, entry):
        import aiohttp.web
        response = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request._raw_request)
        event = {"type": "BOOKMARK", "object": {"apiVersion": "ship.example.org/v1", "kind": "Captain",
                                                "metadata": {"resourceVersion": str(revision)}}}
        await response.write(json.dumps(event).encode() + b"\n")
        await asyncio.sleep(1.5)
        return response
    run.emulator.fault(watch_of_captains, bookmark, "bookmark")
    run.emulator.cut_watches()
    await eventually(lambda: [e for e in run.emulator.log if watch_of_captains(e) and
                              e.query.get("resourceVersion") == str(revision)], 10,
                     f"a watch from the bookmark's resourceVersion {revision}")


async def memory_stays_flat_over_relists(run: Run, api: str) -> None:
    """Held: 2,000 objects relisted 20 times (each watch answered 410 Gone): the RSS after the
    last relist is within 15 % (and 4 MiB) of the one after the fifth."""
    for i in range(2000):
        await run.emulator.put(captain(f"c-{i}"))
    await run.start(api)
    await run.leading()
    await eventually(lambda: run.emulator.reconciled() == 2000, 120, "every one of 2,000 objects is reconciled", step=0.5)
    peaks = []
    relists = max(10, int(os.environ.get("FAULTS_RELISTS", "20")))
    for relist in range(relists):
        lists = len([e for e in run.emulator.log if list_of_captains(e)])
        run.emulator.fault(watch_of_captains, run.emulator.gone, "410 Gone")
        run.emulator.cut_watches()
        await eventually(lambda: len([e for e in run.emulator.log if list_of_captains(e)]) > lists, 20,
                         f"relist {relist + 1}")
        await eventually(run.is_ready, 20, f"ready after relist {relist + 1}")
        await asyncio.sleep(0.5)
        peaks.append(run.rss())
    print(f"   RSS after relists 5, 10, {relists}: {peaks[4] / 1024:.1f}, {peaks[9] / 1024:.1f}, {peaks[-1] / 1024:.1f} MiB"
          f" (peak {run.peak_rss() / 1024:.1f} MiB)")
    check(peaks[-1] <= peaks[4] * 1.15 + 4096, f"the RSS grows over relists: {peaks[4]} KiB, then {peaks[-1]} KiB")


memory_stays_flat_over_relists.timeout = 120 + 6 * int(os.environ.get("FAULTS_RELISTS", "20"))


CASES = [
    lease_moves_during_a_retry_wait,
    a_paused_leader_resumed_past_its_deadline_sends_nothing,
    pending_objects_are_reconciled_a_few_at_a_time,
    an_unanswered_request_times_out_and_is_retried,
    a_503_without_retry_after_reaches_the_backoff_and_the_metrics,
    watch_case("close_at_once", "Finding 5: watches answered 200 and closed at once back off."),
    watch_case("cut_mid_line", "Finding 5: watches cut in the middle of a line back off."),
    watch_case("drop", "Held: watches whose connection drops before an answer back off."),
    shutdown_stops_the_controllers_before_the_servers,
    a_start_that_cannot_sync_ends_the_manager,
    a_relist_that_cannot_sync_turns_readiness_off_and_ends_the_manager,
    the_grace_ends_without_releasing_a_lease_with_a_write_in_flight,
    a_long_retry_after_is_capped,
    readiness_follows_a_broken_watch,
    lists_answered_500_back_off,
    a_watch_gone_410_relists_and_goes_on,
    a_dropped_connection_is_retried_by_the_reconcile,
    a_leader_whose_api_server_hangs_steps_down_at_the_renew_deadline,
    a_bookmark_moves_the_next_watch,
    memory_stays_flat_over_relists,
]


async def run_case(args, emulator_type, case) -> bool:
    import aiohttp
    import kmock
    with tempfile.TemporaryDirectory() as tmp:
        run = Run(args, emulator_type, pathlib.Path(tmp), case.__name__)
        started = time.monotonic()
        try:
            async with kmock.Server(run.emulator) as server:
                api = f"http://{server.host}:{server.port}"
                async with aiohttp.ClientSession(base_url=api) as client:
                    await run.install(client)
                try:
                    await asyncio.wait_for(case(run, api), getattr(case, "timeout", 150))
                finally:
                    await run.stop()
            print(f"ok: {case.__name__} ({time.monotonic() - started:.1f} s)", flush=True)
            return True
        except Exception as error:  # noqa: BLE001 - every failure of a case is reported
            print(f"FAILED: {case.__name__} ({time.monotonic() - started:.1f} s): {case.__doc__.splitlines()[0]}")
            print("   " + (str(error) or repr(error)).replace("\n", "\n   "))
            if not isinstance(error, Failed):
                traceback.print_exc()
            if run.log_path.exists():
                print("   the manager's last log lines:")
                for line in run.logs().splitlines()[-15:]:
                    print(f"   | {line}")
            sys.stdout.flush()
            return False


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manager", required=True, type=pathlib.Path, help="the manager binary")
    parser.add_argument("--project", required=True, type=pathlib.Path, help="the project's directory")
    parser.add_argument("--pending", type=int, action="append", default=[], metavar="N",
                        help="also reconcile N objects present at start and report the peak RSS and descriptors")
    parser.add_argument("cases", nargs="*", help="only the cases whose names contain one of these")
    args = parser.parse_args()
    emulator_type = emulator_class(args.project)
    cases = CASES + [pending_objects(n) for n in args.pending]
    chosen = [c for c in cases if not args.cases or any(word in c.__name__ for word in args.cases)]
    passed = failed = 0
    for case in chosen:
        if await run_case(args, emulator_type, case):
            passed += 1
        else:
            failed += 1
    print(f"faults: {passed} passed, {failed} failed")
    return 1 if failed or not chosen else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
