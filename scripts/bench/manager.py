"""Runs operators one after the other against the project's emulated API server and prints what
each costs: scripts/bench-manager.sh calls it with a scaffolded project and the programs.

For each program and each N, in a fresh emulator holding the project's CRDs and N AppOTP
objects: the CPU seconds (utime + stime, from /proc) and the wall time until every object
carries the program's finalizer and a `Ready=True` condition, the requests the program sent
(counted by the bearer token of its kubeconfig), its peak RSS (VmHWM) and its peak open fds;
then the CPU and requests over an idle period; then the latency from a create to that
object's `Ready`, over creates one at a time. The emulator's own CPU during the sync is printed
beside, so that a reader sees when it, not the program, is the limit. Each figure is the minimum
and the median of the runs.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import pathlib
import socket
import statistics
import sys
import tempfile
import time

NAMESPACE = "bench"
GROUP, VERSION, PLURAL, KIND = "appotp.learn.com", "v1", "appotps", "AppOTP"
FINALIZER = "appotp.learn.com/finalizer"
TICKS = os.sysconf("SC_CLK_TCK")
# Seconds a program may take to reconcile the objects present at start, and one more a hundred.
SYNC_LIMIT = 120


def cpu_seconds(pid: int) -> float:
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def status_kib(pid: int, key: str) -> int:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def open_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def reconciled(obj: dict) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return FINALIZER in (obj["metadata"].get("finalizers") or []) and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def sample(i: int) -> dict:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND,
            "metadata": {"name": f"bench-{i}", "namespace": NAMESPACE}, "spec": {"size": 1}}


async def run_once(emulator_cls, kmock, aiohttp, crds: list[dict], program: list[str], objects: int,
                   idle: float, creates: int, tmp: pathlib.Path) -> dict:
    emulator = emulator_cls()
    async with kmock.Server(emulator) as server:
        # A listen backlog the sync cannot overflow.
        for site in server.server.runner.sites:
            sock = getattr(site, "_sock", None)
            if isinstance(sock, socket.socket):
                sock.listen(4096)
        api = f"http://{server.host}:{server.port}"
        async with aiohttp.ClientSession(base_url=api) as client:
            for crd in crds:
                async with client.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd) as r:
                    assert r.status == 201, await r.text()
            path = f"/apis/{GROUP}/{VERSION}/namespaces/{NAMESPACE}/{PLURAL}"
            started = time.process_time()
            for i in range(objects):
                async with client.post(path, json=sample(i)) as r:
                    assert r.status == 201, await r.text()
            create_cpu = time.process_time() - started
            started = time.process_time()
            async with client.get(path) as r:
                assert len((await r.json())["items"]) == objects
            list_cpu = time.process_time() - started

            kubeconfig = tmp / "kubeconfig"
            kubeconfig.write_text(json.dumps({
                "apiVersion": "v1", "kind": "Config", "current-context": "bench",
                "clusters": [{"name": "bench", "cluster": {"server": api}}],
                "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench", "namespace": NAMESPACE}}],
                "users": [{"name": "bench", "user": {"token": "bench"}}],
            }))
            env = {**os.environ, "KUBECONFIG": str(kubeconfig), "POD_NAMESPACE": NAMESPACE, "POD_NAME": "bench-0",
                   "ENABLE_WEBHOOKS": "false", "RUST_LOG": "error"}
            emulator_started = time.process_time()
            wall_started = time.monotonic()
            process = await asyncio.create_subprocess_exec(*program, env=env, stdout=asyncio.subprocess.DEVNULL)
            try:
                fds = 0
                # A program that never reconciles them all fails the run rather than hang it.
                deadline = wall_started + SYNC_LIMIT + objects / 100
                while True:
                    if time.monotonic() > deadline:
                        raise SystemExit(f"{program[0]} did not reconcile {objects} objects within "
                                         f"{deadline - wall_started:.0f} s")
                    fds = max(fds, open_fds(process.pid))
                    done = sum(1 for (g, v, p, _, _), o in emulator.store.items()
                               if (g, v, p) == (GROUP, VERSION, PLURAL) and reconciled(o))
                    if done == objects:
                        break
                    if process.returncode is not None:
                        raise SystemExit(f"{program[0]} ended with {process.returncode} after {done} of {objects}")
                    await asyncio.sleep(0.05 if objects <= 1000 else 0.25)
                sync = {
                    "cpu": cpu_seconds(process.pid), "wall": time.monotonic() - wall_started,
                    "requests": emulator.requests["bench"], "rss_kib": status_kib(process.pid, "VmHWM"),
                    "fds": fds, "emulator_cpu": time.process_time() - emulator_started,
                }
                if objects == 0:
                    # At rest: after the start-up.
                    await asyncio.sleep(2)
                cpu, requests = cpu_seconds(process.pid), emulator.requests["bench"]
                await asyncio.sleep(idle)
                sync["idle_cpu"] = cpu_seconds(process.pid) - cpu
                sync["idle_requests"] = emulator.requests["bench"] - requests
                sync["idle_rss_kib"] = status_kib(process.pid, "VmRSS")
                sync["idle_anon_kib"] = status_kib(process.pid, "RssAnon")
                latencies = []
                for i in range(creates):
                    name = f"late-{i}"
                    body = sample(0)
                    body["metadata"]["name"] = name
                    began = time.monotonic()
                    async with client.post(path, json=body) as r:
                        assert r.status == 201, await r.text()
                    await emulator.wait_for(
                        lambda: reconciled(emulator.get(GROUP, VERSION, PLURAL, NAMESPACE, name) or {"metadata": {}}),
                        30, f"{name} reconciled")
                    latencies.append((time.monotonic() - began) * 1000)
                latencies.sort()
                sync["latency_median_ms"] = statistics.median(latencies) if latencies else 0.0
                sync["latency_p99_ms"] = latencies[max(0, round(len(latencies) * 0.99) - 1)] if latencies else 0.0
                sync["create_cpu"], sync["list_cpu"] = create_cpu, list_cpu
                return sync
            finally:
                if process.returncode is None:
                    process.terminate()
                    try:
                        await asyncio.wait_for(process.wait(), 10)
                    except TimeoutError:
                        process.kill()
                        await process.wait()


# With no objects, what a program costs at rest.
IDLE_ROWS = [
    ("RSS idle (MiB)", "idle_rss_kib", "{:.1f}"),
    ("of which anonymous memory, not the binary's pages (MiB)", "idle_anon_kib", "{:.1f}"),
    ("CPU over the idle period (s)", "idle_cpu", "{:.3f}"),
    ("requests over the idle period", "idle_requests", "{:.0f}"),
]

ROWS = [
    ("CPU to reconcile all (s)", "cpu", "{:.2f}"),
    ("wall time to reconcile all (s)", "wall", "{:.2f}"),
    ("API requests", "requests", "{:.0f}"),
    ("peak RSS (MiB)", "rss_kib", "{:.1f}"),
    ("peak open fds", "fds", "{:.0f}"),
    ("CPU over the idle period (s)", "idle_cpu", "{:.3f}"),
    ("requests over the idle period", "idle_requests", "{:.0f}"),
    ("RSS after the idle period (MiB)", "idle_rss_kib", "{:.1f}"),
    ("create to reconciled, median (ms)", "latency_median_ms", "{:.1f}"),
    ("create to reconciled, p99 (ms)", "latency_p99_ms", "{:.1f}"),
    ("emulator: CPU during the sync (s)", "emulator_cpu", "{:.2f}"),
    ("emulator: CPU to create N objects (s)", "create_cpu", "{:.2f}"),
    ("emulator: CPU to LIST N objects (s)", "list_cpu", "{:.2f}"),
]


def figure(key: str, values: list[float]) -> float:
    return values if not key.endswith("kib") else [v / 1024 for v in values]


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", required=True, help="a project scaffolded with an AppOTP kind")
    parser.add_argument("--program", action="append", required=True, metavar="NAME=COMMAND",
                        help="a program to measure: its name, then its command line")
    parser.add_argument("--objects", default="0,1000", help="the Ns, comma-separated; 0 for the idle rows")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--idle", type=float, default=60.0, help="seconds of the idle period")
    parser.add_argument("--creates", type=int, default=100, help="creates one at a time, for the latency")
    parser.add_argument("--crd", action="append", default=[], help="another CRD file to install (a peer's)")
    args = parser.parse_args()

    project = pathlib.Path(args.project).resolve()
    sys.path.insert(0, str(project / "hack"))
    import aiohttp
    import kmock
    import yaml
    from kube_emulator import KubeEmulator

    class Counting(KubeEmulator):
        """The emulator, counting every request by its bearer token."""

        def __attrs_post_init__(self) -> None:
            super().__attrs_post_init__()
            self.requests: collections.Counter[str] = collections.Counter()

        async def _handle(self, request):
            self.requests[request.headers.get("Authorization", "").removeprefix("Bearer ")] += 1
            return await super()._handle(request)

    crds = [crd for path in sorted((project / "config/crd/bases").glob("*.yaml")) + [pathlib.Path(p) for p in args.crd]
            for crd in yaml.safe_load_all(path.read_text()) if crd]
    programs = [(spec.split("=", 1)[0], spec.split("=", 1)[1].split()) for spec in args.program]
    ns = [int(n) for n in args.objects.split(",")]
    results: dict[tuple[str, int], list[dict]] = collections.defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        for n in ns:
            for run in range(args.runs):
                for name, command in programs:
                    result = await run_once(Counting, kmock, aiohttp, crds, command, n, args.idle, args.creates,
                                            pathlib.Path(tmp))
                    results[name, n].append(result)
                    print(f"-- {name}, N={n}, run {run + 1}: {result['cpu']:.2f} s CPU, "
                          f"{result['wall']:.2f} s, {result['requests']} requests", file=sys.stderr)
    names = [name for name, _ in programs]
    base = names[0]
    print(f"| N | figure | " + " | ".join(f"{n} min / median" for n in names)
          + " | " + " | ".join(f"{base} / {other}" for other in names[1:]) + " |")
    print("|---|---|" + "---|" * (len(names) + len(names) - 1))
    for n in ns:
        for title, key, fmt in (IDLE_ROWS if n == 0 else ROWS):
            cells, medians = [], []
            for name in names:
                values = figure(key, [r[key] for r in results[name, n]])
                cells.append(f"{fmt.format(min(values))} / {fmt.format(statistics.median(values))}")
                medians.append(statistics.median(values))
            ratios = [f"{medians[0] / m:.2f}" if m else "-" for m in medians[1:]]
            print(f"| {n} | {title} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
