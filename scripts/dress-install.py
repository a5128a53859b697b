#!/usr/bin/env python3
"""Gives the manager Deployment of an install file (dist/install.yaml) what users set on it
through kustomize, so that the chart checks can follow each field into the chart:

    scripts/dress-install.py INSTALL_YAML

Adds, in place: annotations and a label on the Deployment, an annotation and a label on the
pod, imagePullSecrets, priorityClassName, a Recreate strategy, topologySpreadConstraints, a
volume with its mount, and values that YAML 1.1 (which Helm reads) takes for booleans unless
quoted: an env value `on`, a nodeSelector value `no`, a pod annotation `yes` and a Deployment
label `off`. scripts/check-chart.py's "manager fields" check then finds each in the rendered
Deployment, as strings.
"""

import sys

import yaml


def main():
    if len(sys.argv) != 2:
        raise SystemExit(f"usage: {sys.argv[0]} INSTALL_YAML")
    path = sys.argv[1]
    with open(path, encoding="utf-8") as f:
        documents = [d for d in yaml.safe_load_all(f) if d is not None]
    deployments = [d for d in documents if d.get("kind") == "Deployment"]
    if len(deployments) != 1:
        raise SystemExit(f"error: {path} has {len(deployments)} Deployments, not 1")
    deployment = deployments[0]
    metadata = deployment.setdefault("metadata", {})
    metadata.setdefault("annotations", {})["example.com/owner"] = "team-a"
    metadata.setdefault("labels", {})["example.com/canary"] = "off"
    spec = deployment["spec"]
    spec["strategy"] = {"type": "Recreate"}
    template = spec["template"]
    template.setdefault("metadata", {}).setdefault("annotations", {})["example.com/scrape"] = "yes"
    template["metadata"].setdefault("labels", {})["example.com/team"] = "a"
    pod = template["spec"]
    pod["imagePullSecrets"] = [{"name": "registry-credentials"}]
    pod["priorityClassName"] = "system-cluster-critical"
    pod["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"control-plane": "controller-manager"}},
        }
    ]
    pod.setdefault("nodeSelector", {})["example.com/spot"] = "no"
    pod.setdefault("volumes", []).append({"name": "cache", "emptyDir": {}})
    manager = next(
        (c for c in pod["containers"] if c.get("name") == "manager"), pod["containers"][0]
    )
    manager.setdefault("volumeMounts", []).append({"name": "cache", "mountPath": "/cache"})
    manager.setdefault("env", []).append({"name": "EXAMPLE_FEATURE", "value": "on"})
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump_all(documents, f, sort_keys=False)


if __name__ == "__main__":
    main()
