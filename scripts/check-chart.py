#!/usr/bin/env python3
"""Checks a generated Helm chart (dist/chart/) with a real helm, against the project's
dist/install.yaml.

    scripts/check-chart.py --helm HELM --chart CHART_DIR --manifests INSTALL_YAML

Needs PyYAML and kubernetes_validate (scripts/check-chart.sh runs it in a virtualenv that has
both); without them it says so and exits 2. It never skips a check: each one prints
`ok: <check>` or `FAIL: <check>: <why>` (one FAIL line per reason), then the helm calls and
their total time, and last `chart checks: N passed, M failed`. Exit code 0 when nothing
failed, 1 otherwise.

The chart is expected to use kubebuilder's helm/v2-alpha values keys (manager.*, rbac.*,
serviceAccount.*, crd.*, metrics.*, certManager.enabled, webhook.*, prometheus.enabled,
networkPolicy.enabled). P, the project name, is the name of install.yaml's Namespace minus
its `-system` suffix, and NS is that Namespace's name. The checks:

 1. lint: `helm lint CHART` exits 0.
 2. render default: `helm template P CHART --namespace NS` renders and parses.
 3. coverage: with `--set rbac.helpers.enabled=true`, every install.yaml object but the
    Namespace is rendered with the same apiVersion, kind, name and namespace; other rendered
    objects are listed as info, except ServiceMonitors and NetworkPolicies that install.yaml
    lacks: those default off, so they must not render with default values.
 4. schema: every rendered object of a Kubernetes API group passes kubernetes_validate's
    strict schema for Kubernetes 1.33, for the default render and every other full render.
 5. toggles: each value switch below renders, and its effect shows in the objects.
 6. values removed: every key path of values.yaml (but manager.image and
    manager.image.repository) set to null in turn still renders; one helm call per path.
 7. second release: `helm template other CHART --namespace other-ns` puts every namespaced
    object and every namespace reference in other-ns, and never names NS.
 8. schema refusal: values.schema.json exists, and values of the wrong type make helm fail
    with a message about the values or the schema.
 9. image override: manager.image.repository and manager.image.tag make the container image.
10. manager fields: every field install.yaml sets on the manager Deployment (its labels and
    annotations, the pod's, pull secrets, priority class, strategy, spread constraints,
    scheduling, volumes and mounts, env, args, ports, probes, resources, security contexts)
    is in the default render with the same value; labels under app.kubernetes.io/ are the
    chart's own, and the certificate volumes name the release's Secrets.

Helm runs without a cluster (`template` and `lint` only), each call with a 120 s timeout.
"""

import argparse
import json
import os
import subprocess
import sys
import time

try:
    import yaml
    import kubernetes_validate
except ImportError as missing:
    print(
        f"error: cannot import {missing.name}: check-chart.py needs PyYAML and "
        "kubernetes_validate (scripts/check-chart.sh installs them in a virtualenv)",
        file=sys.stderr,
    )
    sys.exit(2)

HELM_TIMEOUT = 120
KUBERNETES_VERSION = "1.33"
OTHER_RELEASE = "other"
OTHER_NAMESPACE = "other-ns"
KUBERNETES_GROUPS = {"", "apps", "batch", "policy", "autoscaling"}
CLUSTER_SCOPED_KINDS = {
    "APIService",
    "ClusterIssuer",
    "ClusterRole",
    "ClusterRoleBinding",
    "CSIDriver",
    "CustomResourceDefinition",
    "IngressClass",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
    "MutatingWebhookConfiguration",
    "Namespace",
    "Node",
    "PersistentVolume",
    "PriorityClass",
    "RuntimeClass",
    "StorageClass",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "ValidatingWebhookConfiguration",
}
WEBHOOK_CONFIGURATIONS = {"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"}
HELPER_ROLE_SUFFIXES = ("-admin-role", "-editor-role", "-viewer-role")
# Paths of values.yaml that the image cannot do without.
NOT_NULLABLE = {"manager.image", "manager.image.repository"}


# ---------------------------------------------------------------------------------------------
# Running helm and reporting


class Helm:
    """Runs helm with a timeout and adds up the time its calls take."""

    def __init__(self, binary):
        self.binary = binary
        self.calls = 0
        self.seconds = 0.0

    def run(self, *args):
        """Returns (exit code, stdout, stderr); a timeout is exit code 124."""
        start = time.monotonic()
        try:
            done = subprocess.run(
                [self.binary, *args],
                capture_output=True,
                text=True,
                timeout=HELM_TIMEOUT,
            )
            result = (done.returncode, done.stdout, done.stderr)
        except subprocess.TimeoutExpired:
            result = (124, "", f"helm {' '.join(args)} timed out after {HELM_TIMEOUT} s")
        self.calls += 1
        self.seconds += time.monotonic() - start
        return result


class Report:
    """Prints and counts the outcome of each check."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, name, reasons):
        """A check passes when it has no reasons to fail."""
        if reasons:
            self.failed += 1
            for reason in reasons:
                print(f"FAIL: {name}: {reason}", flush=True)
        else:
            self.passed += 1
            print(f"ok: {name}", flush=True)
        return not reasons

    @staticmethod
    def info(message):
        print(f"info: {message}", flush=True)


def helm_error(text, limit=400):
    """helm's stderr on one line, without its --debug hint, cut to `limit` characters."""
    lines = [
        " ".join(line.split())
        for line in text.splitlines()
        if line.strip() and not line.startswith("Use --debug flag")
    ]
    message = " | ".join(lines) or "(no message)"
    return message if len(message) <= limit else message[: limit - 3] + "..."


# ---------------------------------------------------------------------------------------------
# Kubernetes objects


def group_of(obj):
    api_version = str(obj.get("apiVersion", ""))
    return api_version.split("/")[0] if "/" in api_version else ""


def meta(obj):
    return obj.get("metadata") or {}


def identity(obj):
    """(apiVersion, kind, name, namespace); namespace is None when there is none."""
    m = meta(obj)
    return (obj.get("apiVersion"), obj.get("kind"), m.get("name"), m.get("namespace"))


def describe(obj):
    api_version, kind, name, namespace = identity(obj)
    where = f" in {namespace}" if namespace else ""
    return f"{kind} {name}{where} ({api_version})"


def short(obj):
    return f"{obj.get('kind')}/{meta(obj).get('name')}"


def of_kind(objs, *kinds):
    return [o for o in objs if o.get("kind") in kinds]


def containers(deployment):
    spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    return spec.get("containers") or []


def pod_spec(deployment):
    return ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}


def manager_containers(objs):
    """The container named manager of each Deployment (or its first container)."""
    found = []
    for deployment in of_kind(objs, "Deployment"):
        cs = containers(deployment)
        named = [c for c in cs if c.get("name") == "manager"]
        found.extend(named or cs[:1])
    return found


def manager_args(objs):
    return [str(a) for c in manager_containers(objs) for a in (c.get("args") or [])]


def annotations(obj):
    return meta(obj).get("annotations") or {}


def is_kubernetes_group(group):
    return group in KUBERNETES_GROUPS or group.endswith(".k8s.io")


def parse_documents(text):
    """The objects of a multi-document YAML text, or raises ValueError."""
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        raise ValueError(f"not valid YAML: {err}") from err
    for doc in docs:
        if not isinstance(doc, dict):
            raise ValueError(f"a document is not a mapping: {str(doc)[:80]!r}")
        if not doc.get("apiVersion") or not doc.get("kind") or not meta(doc).get("name"):
            raise ValueError(
                f"an object lacks apiVersion, kind or metadata.name: {str(doc)[:120]}"
            )
    return docs


# ---------------------------------------------------------------------------------------------
# The context shared by the checks


class Chart:
    """The chart under test, its project and its renders."""

    def __init__(self, helm, chart_dir, manifests, report):
        self.helm = helm
        self.dir = chart_dir
        self.report = report
        self.manifests = manifests
        namespaces = of_kind(manifests, "Namespace")
        if len(namespaces) != 1:
            raise SystemExit(f"error: install.yaml has {len(namespaces)} Namespace objects, not 1")
        self.namespace = meta(namespaces[0])["name"]
        if not self.namespace.endswith("-system"):
            raise SystemExit(f"error: the Namespace {self.namespace} does not end in -system")
        self.project = self.namespace[: -len("-system")]
        self.validated = {}

    def template(self, sets=(), release=None, namespace=None):
        """Renders the chart; returns (objects, text, error). error is None on success."""
        args = ["template", release or self.project, self.dir]
        args += ["--namespace", namespace or self.namespace]
        for s in sets:
            args += ["--set", s]
        code, out, err = self.helm.run(*args)
        if code != 0:
            return None, out, f"helm template exited {code}: {helm_error(err)}"
        try:
            return parse_documents(out), out, None
        except ValueError as bad:
            return None, out, str(bad)

    def schema_errors(self, objs):
        """Strict kubernetes_validate errors of the objects of Kubernetes groups."""
        errors = []
        for obj in objs:
            if not is_kubernetes_group(group_of(obj)):
                continue
            key = json.dumps(obj, sort_keys=True, default=str)
            if key not in self.validated:
                self.validated[key] = validation_error(obj)
            if self.validated[key]:
                errors.append(f"{short(obj)}: {self.validated[key]}")
        return errors

    def render_and_check(self, label, sets, assertion=None, release=None, namespace=None):
        """Renders with `sets`, then checks the render, its schema and the assertion."""
        objs, text, error = self.template(sets, release, namespace)
        if error:
            self.report.check(label, [error])
            return None, text
        reasons = assertion(self, objs, text) if assertion else []
        self.report.check(label, reasons)
        self.report.check(f"schema {label}", self.schema_errors(objs))
        return objs, text

    def manager_role(self, objs):
        name = f"{self.project}-manager-role"
        return [o for o in of_kind(objs, "Role", "ClusterRole") if meta(o).get("name") == name]


def validation_error(obj):
    """kubernetes_validate's complaint about one object, or None."""
    try:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        return None
    except Exception as err:  # noqa: BLE001 - every kind of refusal is reported
        message = getattr(err, "message", None) or str(err)
        path = "/".join(str(p) for p in getattr(err, "absolute_path", []) or [])
        where = f" at {path}" if path else ""
        return f"{type(err).__name__}: {message}{where}"


# ---------------------------------------------------------------------------------------------
# Assertions of the toggles: each returns a list of reasons to fail


def no_crds(chart, objs, text):
    return [f"{describe(o)} rendered" for o in of_kind(objs, "CustomResourceDefinition")]


def crds_keep_policy(expected):
    """Every CRD carries helm.sh/resource-policy: keep (expected) or no such annotation."""

    def check(chart, objs, text):
        reasons = []
        for crd in of_kind(objs, "CustomResourceDefinition"):
            policy = annotations(crd).get("helm.sh/resource-policy")
            if expected and policy != "keep":
                reasons.append(f"{short(crd)} has helm.sh/resource-policy={policy!r}, not keep")
            if not expected and policy is not None:
                reasons.append(f"{short(crd)} still has helm.sh/resource-policy={policy!r}")
        return reasons

    return check


def metrics_off(chart, objs, text):
    reasons = [
        f"{describe(s)} rendered"
        for s in of_kind(objs, "Service")
        if str(meta(s).get("name", "")).endswith("metrics-service")
    ]
    for arg in manager_args(objs):
        if arg.startswith("--metrics-bind-address=") and arg != "--metrics-bind-address=0":
            reasons.append(f"manager argument {arg}")
    return reasons


def metrics_insecure(chart, objs, text):
    args = manager_args(objs)
    if "--metrics-secure=false" not in args:
        return [f"manager arguments lack --metrics-secure=false: {args}"]
    return []


def cert_manager_off(chart, objs, text):
    reasons = [f"{describe(o)} rendered" for o in objs if group_of(o) == "cert-manager.io"]
    for number, line in enumerate(text.splitlines(), 1):
        if "cert-manager" in line.lower():
            reasons.append(f"line {number} mentions cert-manager: {line.strip()}")
    return reasons


def webhooks_off(chart, objs, text):
    reasons = [f"{describe(o)} rendered" for o in of_kind(objs, *WEBHOOK_CONFIGURATIONS)]
    for crd in of_kind(objs, "CustomResourceDefinition"):
        strategy = ((crd.get("spec") or {}).get("conversion") or {}).get("strategy")
        if strategy == "Webhook":
            reasons.append(f"{short(crd)} keeps a Webhook conversion strategy")
    return reasons


def kinds_appear(*kinds):
    def check(chart, objs, text):
        if not of_kind(objs, *kinds):
            return [f"no {' or '.join(kinds)} rendered"]
        return []

    return check


def manager_role_is(kind):
    """The manager's role is a Role in NS (kind Role) or a ClusterRole; bindings agree."""

    def check(chart, objs, text):
        roles = chart.manager_role(objs)
        if not roles:
            return [f"no Role or ClusterRole named {chart.project}-manager-role rendered"]
        reasons = []
        for role in roles:
            if role.get("kind") != kind:
                reasons.append(f"{describe(role)} is a {role.get('kind')}, not a {kind}")
            elif kind == "Role" and meta(role).get("namespace") != chart.namespace:
                reasons.append(f"{describe(role)} is not in {chart.namespace}")
        name = f"{chart.project}-manager-role"
        for binding in of_kind(objs, "RoleBinding", "ClusterRoleBinding"):
            ref = binding.get("roleRef") or {}
            if ref.get("name") == name and ref.get("kind") != kind:
                reasons.append(f"{short(binding)} refers to a {ref.get('kind')} {name}")
        return reasons

    return check


def helper_roles_appear(chart, objs, text):
    wanted = {
        meta(o)["name"]
        for o in of_kind(chart.manifests, "Role", "ClusterRole")
        if str(meta(o)["name"]).endswith(HELPER_ROLE_SUFFIXES)
    }
    have = {meta(o)["name"] for o in of_kind(objs, "Role", "ClusterRole")}
    return [f"helper role {name} not rendered" for name in sorted(wanted - have)]


def default_service_account(chart, objs, text):
    reasons = [f"{describe(o)} rendered" for o in of_kind(objs, "ServiceAccount")]
    deployments = of_kind(objs, "Deployment")
    if not deployments:
        reasons.append("no Deployment rendered")
    for deployment in deployments:
        account = pod_spec(deployment).get("serviceAccountName")
        if account != "default":
            reasons.append(f"{short(deployment)} has serviceAccountName {account!r}")
    return reasons


def no_deployment(chart, objs, text):
    return [f"{describe(o)} rendered" for o in of_kind(objs, "Deployment")]


def replicas_are(count):
    def check(chart, objs, text):
        deployments = of_kind(objs, "Deployment")
        if not deployments:
            return ["no Deployment rendered"]
        return [
            f"{short(d)} has replicas {(d.get('spec') or {}).get('replicas')!r}"
            for d in deployments
            if (d.get("spec") or {}).get("replicas") != count
        ]

    return check


def metrics_port_is(port):
    def check(chart, objs, text):
        reasons = []
        if f"--metrics-bind-address=:{port}" not in manager_args(objs):
            reasons.append(f"manager arguments lack --metrics-bind-address=:{port}")
        services = [
            s
            for s in of_kind(objs, "Service")
            if str(meta(s).get("name", "")).endswith("metrics-service")
        ]
        if not services:
            reasons.append("no metrics Service rendered")
        for service in services:
            ports = (service.get("spec") or {}).get("ports") or []
            if not any(port in (p.get("port"), p.get("targetPort")) for p in ports):
                reasons.append(f"{short(service)} has no port {port}: {ports}")
        return reasons

    return check


def container_port_numbers(container):
    return {p.get("containerPort") for p in container.get("ports") or []}


def webhook_port_is(port):
    def check(chart, objs, text):
        reasons = []
        managers = manager_containers(objs)
        if not managers:
            reasons.append("no manager container rendered")
        for container in managers:
            if port not in container_port_numbers(container):
                reasons.append(f"manager container ports lack {port}")
        if f"--webhook-port={port}" not in manager_args(objs):
            reasons.append(f"manager arguments lack --webhook-port={port}")
        port_names = {
            p.get("name"): p.get("containerPort")
            for c in managers
            for p in c.get("ports") or []
        }
        for service in of_kind(objs, "Service"):
            if not str(meta(service).get("name", "")).endswith("webhook-service"):
                continue
            for p in (service.get("spec") or {}).get("ports") or []:
                target = p.get("targetPort")
                if target != port and port_names.get(target) != port:
                    reasons.append(f"{short(service)} targets port {target!r}, not {port}")
        return reasons

    return check


def probe_port_is(port):
    def check(chart, objs, text):
        managers = manager_containers(objs)
        if not managers:
            return ["no manager container rendered"]
        reasons = []
        for container in managers:
            for probe in ("livenessProbe", "readinessProbe"):
                got = ((container.get(probe) or {}).get("httpGet") or {}).get("port")
                if got != port:
                    reasons.append(f"{probe} port is {got!r}, not {port}")
        if f"--health-probe-bind-address=:{port}" not in manager_args(objs):
            reasons.append(f"manager arguments lack --health-probe-bind-address=:{port}")
        return reasons

    return check


def image_is(image):
    def check(chart, objs, text):
        managers = manager_containers(objs)
        if not managers:
            return ["no manager container rendered"]
        return [
            f"manager image is {c.get('image')!r}, not {image!r}"
            for c in managers
            if c.get("image") != image
        ]

    return check


TOGGLES = [
    ("crd.enabled=false", no_crds),
    ("crd.keep=false", crds_keep_policy(False)),
    ("metrics.enabled=false", metrics_off),
    ("metrics.secure=false", metrics_insecure),
    ("certManager.enabled=false", cert_manager_off),
    ("webhook.enabled=false", webhooks_off),
    ("prometheus.enabled=true", kinds_appear("ServiceMonitor")),
    ("networkPolicy.enabled=true", kinds_appear("NetworkPolicy")),
    ("rbac.namespaced=true", manager_role_is("Role")),
    ("rbac.namespaced=false", manager_role_is("ClusterRole")),
    ("rbac.helpers.enabled=true", helper_roles_appear),
    ("serviceAccount.enabled=false,serviceAccount.name=default", default_service_account),
    ("manager.enabled=false", no_deployment),
    ("manager.replicas=3", replicas_are(3)),
    ("metrics.port=9000", metrics_port_is(9000)),
    ("webhook.port=9999", webhook_port_is(9999)),
    ("manager.healthProbe.port=9090", probe_port_is(9090)),
]


# ---------------------------------------------------------------------------------------------
# The checks


def check_lint(chart):
    code, out, err = chart.helm.run("lint", chart.dir)
    reasons = []
    if code != 0:
        errors = [l.strip() for l in (out + err).splitlines() if "[ERROR]" in l or "Error" in l]
        reasons.append(f"helm lint exited {code}: {'; '.join(errors) or helm_error(err)}")
    chart.report.check("lint", reasons)


def check_default(chart):
    objs, text = chart.render_and_check("render default", [])
    if objs is not None:
        chart.report.check("crd.keep default", crds_keep_policy(True)(chart, objs, text))


def check_coverage(chart):
    label = "coverage (rbac.helpers.enabled=true)"
    objs, text = chart.render_and_check(label, ["rbac.helpers.enabled=true"], coverage_reasons)
    if objs is None:
        return
    expected = {identity(o) for o in chart.manifests if o.get("kind") != "Namespace"}
    for obj in objs:
        if identity(obj) not in expected:
            Report.info(f"rendered, not in install.yaml: {describe(obj)}")


def coverage_reasons(chart, objs, text):
    rendered = {identity(o) for o in objs}
    reasons = []
    for obj in chart.manifests:
        if obj.get("kind") == "Namespace" or identity(obj) in rendered:
            continue
        api_version, kind, name, _ = identity(obj)
        near = [r for r in rendered if r[:3] == (api_version, kind, name)]
        hint = f" (rendered in namespace {near[0][3]!r} instead)" if near else ""
        reasons.append(f"missing {describe(obj)}{hint}")
    expected = {identity(o) for o in chart.manifests}
    for obj in of_kind(objs, "ServiceMonitor", "NetworkPolicy"):
        if identity(obj) not in expected:
            reasons.append(f"{describe(obj)} rendered by default; install.yaml lacks it")
    return reasons


# Labels the chart writes itself, with its own values: kustomize's are replaced by Helm's.
CHART_LABEL_PREFIX = "app.kubernetes.io/"
# The fields of the manager's pod spec and container that the chart must carry as they are.
POD_FIELDS = (
    "imagePullSecrets",
    "priorityClassName",
    "topologySpreadConstraints",
    "nodeSelector",
    "tolerations",
    "affinity",
    "securityContext",
    "terminationGracePeriodSeconds",
)
CONTAINER_FIELDS = ("image", "resources", "securityContext", "livenessProbe", "readinessProbe")
# Volumes the chart writes from certManager.enabled, naming the release's Secrets.
CERT_VOLUMES = ("webhook-certs", "metrics-certs")


def check_manager_fields(chart):
    """Every field install.yaml sets on the manager Deployment is in the default render, with
    the same value (strings stay strings: YAML 1.1 words included)."""
    objs, _, error = chart.template()
    if error:
        chart.report.check("manager fields", [error])
        return
    chart.report.check("manager fields", manager_field_reasons(chart.manifests, objs))


def manager_field_reasons(manifests, objs):
    installed, rendered = of_kind(manifests, "Deployment"), of_kind(objs, "Deployment")
    if len(installed) != 1 or len(rendered) != 1:
        return [f"{len(installed)} Deployments in install.yaml, {len(rendered)} rendered; 1 each expected"]
    want, have = installed[0], rendered[0]
    reasons = []

    def same(label, expected, actual):
        if expected != actual:
            reasons.append(f"{label}: install.yaml has {expected!r}, the chart {actual!r}")

    def within(label, expected, actual, skip=lambda key: False):
        for key, value in (expected or {}).items():
            if not skip(key):
                same(f"{label}[{key}]", value, (actual or {}).get(key))

    chart_label = lambda key: key.startswith(CHART_LABEL_PREFIX)
    within("metadata.annotations", annotations(want), annotations(have))
    within("metadata.labels", meta(want).get("labels"), meta(have).get("labels"), chart_label)
    template_meta = lambda d: (d["spec"].get("template") or {}).get("metadata") or {}
    within("pod annotations", template_meta(want).get("annotations"), template_meta(have).get("annotations"))
    within("pod labels", template_meta(want).get("labels"), template_meta(have).get("labels"), chart_label)
    if "strategy" in want["spec"]:
        same("spec.strategy", want["spec"]["strategy"], have["spec"].get("strategy"))
    want_pod, have_pod = pod_spec(want), pod_spec(have)
    for field in POD_FIELDS:
        if field in want_pod:
            same(f"pod {field}", want_pod[field], have_pod.get(field))
    have_volumes = {v.get("name"): v for v in have_pod.get("volumes") or []}
    for volume in want_pod.get("volumes") or []:
        name = volume.get("name")
        if name not in have_volumes:
            reasons.append(f"volume {name}: not rendered")
        elif name not in CERT_VOLUMES:
            same(f"volume {name}", volume, have_volumes[name])
    want_container, have_container = manager_containers([want])[0], manager_containers([have])[0]
    for field in CONTAINER_FIELDS:
        if field in want_container and field != "image":
            same(f"container {field}", want_container[field], have_container.get(field))
    for mount in want_container.get("volumeMounts") or []:
        if mount not in (have_container.get("volumeMounts") or []):
            reasons.append(f"volumeMount {mount!r}: not rendered")
    have_env = {e.get("name"): e for e in have_container.get("env") or []}
    for variable in want_container.get("env") or []:
        same(f"env {variable.get('name')}", variable, have_env.get(variable.get("name")))
    for arg in want_container.get("args") or []:
        if str(arg) not in [str(a) for a in have_container.get("args") or []]:
            reasons.append(f"arg {arg!r}: not rendered")
    have_ports = have_container.get("ports") or []
    for port in want_container.get("ports") or []:
        if port not in have_ports:
            reasons.append(f"port {port!r}: not rendered")
    return reasons


def check_toggles(chart):
    for sets, assertion in TOGGLES:
        chart.render_and_check(f"toggle {sets}", [sets], assertion)


def escape_key(key):
    """A values key as one segment of a --set path."""
    out = str(key)
    for special in "\\.,[=":
        out = out.replace(special, "\\" + special)
    return out


def value_paths(values, prefix=""):
    """Every mapping key path of values, parents before children, dots escaped."""
    paths = []
    if isinstance(values, dict):
        for key, child in values.items():
            path = f"{prefix}{escape_key(key)}"
            paths.append(path)
            paths.extend(value_paths(child, path + "."))
    return paths


def check_values_removed(chart):
    path = os.path.join(chart.dir, "values.yaml")
    try:
        with open(path) as f:
            values = yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError) as err:
        chart.report.check("values removed", [f"cannot read {path}: {err}"])
        return
    paths = [p for p in value_paths(values) if p not in NOT_NULLABLE]
    if not paths:
        chart.report.check("values removed", [f"{path} has no keys"])
        return
    calls, seconds = chart.helm.calls, chart.helm.seconds
    for key_path in paths:
        _, _, error = chart.template([f"{key_path}=null"])
        chart.report.check(f"value removed {key_path}=null", [error] if error else [])
    Report.info(
        f"values removed: {len(paths)} paths, {chart.helm.calls - calls} helm calls, "
        f"{chart.helm.seconds - seconds:.1f} s"
    )


def check_second_release(chart):
    chart.render_and_check(
        f"second release {OTHER_RELEASE} in {OTHER_NAMESPACE}",
        [],
        second_release_reasons,
        release=OTHER_RELEASE,
        namespace=OTHER_NAMESPACE,
    )


def cluster_scoped_kinds(chart):
    """Known cluster-scoped kinds, and the kinds install.yaml has without a namespace."""
    return CLUSTER_SCOPED_KINDS | {
        o.get("kind") for o in chart.manifests if not meta(o).get("namespace")
    }


def second_release_reasons(chart, objs, text):
    ns = OTHER_NAMESPACE
    cluster_kinds = cluster_scoped_kinds(chart)
    reasons = []
    if chart.namespace in text:
        lines = [l.strip() for l in text.splitlines() if chart.namespace in l]
        reasons.append(f"the text names {chart.namespace}: {lines[:5]}")
    for obj in objs:
        namespace = meta(obj).get("namespace")
        if obj.get("kind") not in cluster_kinds and namespace != ns:
            reasons.append(f"{describe(obj)} is not in {ns}")
        for key, value in annotations(obj).items():
            if key == "cert-manager.io/inject-ca-from" and not str(value).startswith(f"{ns}/"):
                reasons.append(f"{short(obj)} injects the CA from {value}")
    for cert in of_kind(objs, "Certificate"):
        for dns in (cert.get("spec") or {}).get("dnsNames") or []:
            if not str(dns).endswith((f".{ns}.svc", f".{ns}.svc.cluster.local")):
                reasons.append(f"{short(cert)} has dnsName {dns}")
    for obj, service in webhook_services(objs):
        if service.get("namespace") != ns:
            where = f"{service.get('namespace')}/{service.get('name')}"
            reasons.append(f"{short(obj)} calls the service {where}")
    for binding in of_kind(objs, "RoleBinding", "ClusterRoleBinding"):
        for subject in binding.get("subjects") or []:
            if subject.get("kind") == "ServiceAccount" and subject.get("namespace") != ns:
                reasons.append(
                    f"{short(binding)} binds ServiceAccount "
                    f"{subject.get('namespace')}/{subject.get('name')}"
                )
    return reasons


def webhook_services(objs):
    """(object, clientConfig.service) of every webhook and CRD conversion webhook."""
    found = []
    for config in of_kind(objs, *WEBHOOK_CONFIGURATIONS):
        for hook in config.get("webhooks") or []:
            service = (hook.get("clientConfig") or {}).get("service")
            if service is not None:
                found.append((config, service))
    for crd in of_kind(objs, "CustomResourceDefinition"):
        conversion = (crd.get("spec") or {}).get("conversion") or {}
        service = ((conversion.get("webhook") or {}).get("clientConfig") or {}).get("service")
        if service is not None:
            found.append((crd, service))
    return found


def check_schema_refusal(chart):
    schema = os.path.join(chart.dir, "values.schema.json")
    chart.report.check(
        "values.schema.json exists", [] if os.path.isfile(schema) else [f"no {schema}"]
    )
    for bad in ("manager.replicas=many", "metrics.port=abc", "crd.enabled=maybe"):
        code, _, err = chart.helm.run(
            "template", chart.project, chart.dir, "--namespace", chart.namespace, "--set", bad
        )
        reasons = []
        if code == 0:
            reasons.append("helm template accepted it")
        elif "values" not in err.lower() and "schema" not in err.lower():
            reasons.append(f"helm failed without naming the values or schema: {helm_error(err)}")
        chart.report.check(f"schema refuses {bad}", reasons)


def check_image_override(chart):
    chart.render_and_check(
        "image override",
        ["manager.image.repository=example.com/op", "manager.image.tag=v1.2.3"],
        image_is("example.com/op:v1.2.3"),
    )


# ---------------------------------------------------------------------------------------------


def load_manifests(path):
    try:
        with open(path) as f:
            return parse_documents(f.read())
    except (OSError, ValueError) as err:
        raise SystemExit(f"error: cannot read {path}: {err}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--helm", required=True, help="the helm binary")
    parser.add_argument("--chart", required=True, help="the chart directory (dist/chart)")
    parser.add_argument("--manifests", required=True, help="the project's dist/install.yaml")
    args = parser.parse_args()
    if not (os.path.isfile(args.helm) and os.access(args.helm, os.X_OK)):
        raise SystemExit(f"error: {args.helm} is not an executable helm")
    if not os.path.isfile(os.path.join(args.chart, "Chart.yaml")):
        raise SystemExit(f"error: {args.chart} has no Chart.yaml")

    report = Report()
    helm = Helm(args.helm)
    chart = Chart(helm, args.chart, load_manifests(args.manifests), report)
    Report.info(f"project {chart.project}, namespace {chart.namespace}, chart {chart.dir}")
    started = time.monotonic()
    for check in (
        check_lint,
        check_default,
        check_coverage,
        check_manager_fields,
        check_toggles,
        check_values_removed,
        check_second_release,
        check_schema_refusal,
        check_image_override,
    ):
        check(chart)
    Report.info(
        f"schema: {len(chart.validated)} distinct objects validated strictly "
        f"against Kubernetes {KUBERNETES_VERSION}"
    )
    print(
        f"helm: {helm.calls} calls, {helm.seconds:.1f} s "
        f"(all checks {time.monotonic() - started:.1f} s)"
    )
    print(f"chart-checks: {report.passed} passed, {report.failed} failed")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
