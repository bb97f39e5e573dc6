"""Every Kubernetes manifest under deploy/ parses, and what it references exists.

Checked: images are the one the Dockerfile builds; ConfigMaps, PVCs and
Services referenced are defined (Secrets are the operator's, and must be the
documented ones); every Service selects some pod template and targets a port
it declares; every ``feedha`` command line is a real sub-command whose
arguments parse; adapter groups keep their members on different nodes.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from feedha.cli import COMMANDS

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
IMAGE = "feedha:latest"
OPERATOR_SECRETS = {
    "feedha-admin-tls",
    "feedha-admin-ca",
    "feedha-adapter-key-eq-a-m",
    "feedha-adapter-key-eq-n-z",
    "feedha-adapter-curve",
}  # created by hand (deploy/k8s/config.yaml)
WORKLOADS = {"Deployment", "StatefulSet", "Pod"}
# What the adapters' shell scripts expand to (other variables become "1").
SHELL_VALUES = {"peers": "--peer tcp://peer:6002 --peer tcp://peer:6002", "active": "--active"}


def _manifests() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    docs = []
    for resource in kustomization["resources"]:
        for doc in yaml.safe_load_all((DEPLOY / resource).read_text()):
            if doc:
                docs.append(doc)
    return docs


DOCS = _manifests()


def _pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"] if doc["kind"] == "Pod" else doc["spec"]["template"]["spec"]


def _pod_labels(doc: dict[str, Any]) -> dict[str, str]:
    meta = doc["metadata"] if doc["kind"] == "Pod" else doc["spec"]["template"]["metadata"]
    return dict(meta.get("labels", {}))


def _named(kind: str) -> set[str]:
    return {d["metadata"]["name"] for d in DOCS if d["kind"] == kind}


def _workloads() -> list[dict[str, Any]]:
    return [d for d in DOCS if d["kind"] in WORKLOADS]


def test_every_manifest_is_listed_and_parses() -> None:
    listed = set(yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"])
    on_disk = {str(p.relative_to(DEPLOY)) for p in (DEPLOY / "k8s").glob("*.yaml")}
    on_disk |= {str(p.relative_to(DEPLOY)) for p in (DEPLOY / "spark").glob("*.yaml")}
    assert on_disk <= listed
    assert all("apiVersion" in d and "kind" in d and "name" in d["metadata"] for d in DOCS)
    assert {"Deployment", "StatefulSet", "Service", "ConfigMap"} <= {d["kind"] for d in DOCS}


def test_images_are_built_by_the_dockerfile() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert IMAGE in dockerfile  # the build command names the tag
    assert "/opt/spark" in dockerfile  # the Spark driver runs /opt/spark/bin/spark-submit
    for doc in _workloads():
        for container in _pod_spec(doc)["containers"]:
            assert container["image"] == IMAGE, doc["metadata"]["name"]


def test_the_image_copies_every_installed_package() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    pyproject = tomllib.loads((DEPLOY.parent / "pyproject.toml").read_text())
    assert "COPY pyproject.toml setup.py " in dockerfile  # setup.py maps the folders and builds the C parts
    for folder in pyproject["tool"]["feedha"]["namespace"].values():
        assert f"COPY {folder} {folder}\n" in dockerfile, folder


def test_referenced_objects_exist() -> None:
    configmaps, claims, services = _named("ConfigMap"), _named("PersistentVolumeClaim"), _named("Service")
    for doc in _workloads():
        spec = _pod_spec(doc)
        templates = {t["metadata"]["name"] for t in doc.get("spec", {}).get("volumeClaimTemplates", [])}
        volumes = {v["name"] for v in spec.get("volumes", [])} | templates
        for volume in spec.get("volumes", []):
            if "configMap" in volume:
                assert volume["configMap"]["name"] in configmaps
            if "persistentVolumeClaim" in volume:
                assert volume["persistentVolumeClaim"]["claimName"] in claims
            if "secret" in volume:
                assert volume["secret"]["secretName"] in OPERATOR_SECRETS
        if "serviceAccountName" in spec:
            assert spec["serviceAccountName"] in _named("ServiceAccount")
        for container in spec["containers"]:
            for mount in container.get("volumeMounts", []):
                assert mount["name"] in volumes
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["name"] in OPERATOR_SECRETS
        if doc["kind"] == "StatefulSet":
            assert doc["spec"]["serviceName"] in services
    text = "\n".join(yaml.safe_dump(d) for d in _workloads())
    for host in re.findall(r"tcp://([a-z][a-z0-9-]*)[:.]", text) + re.findall(r"--admin[ =]([a-z-]+):", text):
        assert host.split(".")[0] in services or re.sub(r"-\d+$", "", host) in services, host


def test_services_select_pods_and_target_their_ports() -> None:
    pods = [(_pod_labels(d), _pod_spec(d)) for d in _workloads()]
    for service in (d for d in DOCS if d["kind"] == "Service"):
        selector = service["spec"]["selector"]
        matching = [spec for labels, spec in pods if selector.items() <= labels.items()]
        assert matching, f"service {service['metadata']['name']} selects no pod"
        declared = {p["containerPort"] for spec in matching for c in spec["containers"] for p in c["ports"]}
        for port in service["spec"]["ports"]:
            assert port.get("targetPort", port["port"]) in declared, service["metadata"]["name"]


def _feedha_command_lines(doc: dict[str, Any]) -> list[list[str]]:
    lines = []
    for container in _pod_spec(doc)["containers"]:
        argv = list(container.get("command", [])) + list(container.get("args", []))
        if argv[:2] == ["sh", "-c"]:
            script = re.sub(r"\\\n", " ", argv[2])
            for line in script.splitlines():
                if "exec feedha " in line:
                    command = line.split("exec ", 1)[1]
                    for name, value in SHELL_VALUES.items():
                        command = command.replace(f"${name} ", f"{value} ")
                    words = shlex.split(command)
                    lines.append([re.sub(r"\$\{?(\w+)\}?", "1", w) for w in words])
        elif argv and argv[0] == "feedha":
            lines.append(argv)
    return lines


def test_feedha_commands_exist_and_parse() -> None:
    from feedha.adapter.__main__ import build_parser as adapter_parser

    seen = set()
    for doc in _workloads():
        for argv in _feedha_command_lines(doc):
            assert argv[1] in COMMANDS, argv
            seen.add(argv[1])
            if argv[1] == "adapter":
                args = adapter_parser().parse_args([a for a in argv[2:] if a])
                assert args.journal is not None and args.replay is not None
    assert {"admin-server", "adapter"} <= seen


@pytest.mark.parametrize(
    "group", [d for d in DOCS if d["kind"] == "StatefulSet"], ids=lambda d: d["metadata"]["name"]
)
def test_adapter_groups_never_share_a_node(group: dict[str, Any]) -> None:
    rules = _pod_spec(group)["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    labels = _pod_labels(group)
    assert any(
        r["topologyKey"] == "kubernetes.io/hostname"
        and r["labelSelector"]["matchLabels"].items() <= labels.items()
        for r in rules
    )
    assert group["spec"]["replicas"] >= 2


def test_adapters_verify_the_admin_server_and_their_key_is_bound_to_their_group() -> None:
    """Every adapter reaches the admin server over TLS, with a key the policy binds to its own adapters."""
    from feedha.adapter.__main__ import build_parser as adapter_parser
    from feedha.admin_server.policy import Principal, parse_policy

    (config,) = [d for d in DOCS if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "feedha-config"]
    policy = parse_policy(config["data"]["policy.yaml"], source="feedha-config/policy.yaml")
    channels = {c for binding in policy.adapters.values() for c in binding.channels}
    for doc in (d for d in DOCS if d["kind"] == "StatefulSet"):
        (container,) = _pod_spec(doc)["containers"]
        refs = {e["name"]: e.get("valueFrom", {}).get("secretKeyRef", {}) for e in container["env"]}
        # the group's own key: secret feedha-adapter-key-eq-a-m holds user feed-eq-a-m's key
        user = refs["ADAPTER_KEY_ID"]["name"].replace("feedha-adapter-key-", "feed-")
        for argv in _feedha_command_lines(doc):
            args = adapter_parser().parse_args([a for a in argv[2:] if a])
            assert args.admin and args.admin_tls_ca is not None, doc["metadata"]["name"]
            principal = Principal(user=user)
            for number in range(1, doc["spec"]["replicas"] + 1):
                adapter_id = f"{args.channel}.{number}"
                assert policy.may_register(principal, channel_name=args.channel, adapter_id=adapter_id)
            for other in channels - {args.channel}:
                assert not policy.may_register(principal, channel_name=other, adapter_id=f"{other}.1")


def test_daemons_are_probed_on_their_health_endpoints() -> None:
    probed = 0
    for doc in _workloads():
        for container in _pod_spec(doc)["containers"]:
            if container["name"] not in ("admin-server", "adapter"):
                continue
            ports = {p["containerPort"] for p in container.get("ports", [])}
            for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
                check = container[probe]["httpGet"]
                assert check["path"] == path and check["port"] in ports, (doc["metadata"]["name"], probe)
            probed += 1
    assert probed == 3  # the admin server and both adapter groups


def test_the_grafana_dashboard_is_importable() -> None:
    import json

    dashboard = json.loads((DEPLOY / "grafana" / "feedha-dashboard.json").read_text())
    assert dashboard["uid"] and dashboard["title"] == "feedha"
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len(panels) >= 15
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["expr"].count("(") == target["expr"].count(")"), target["expr"]
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
