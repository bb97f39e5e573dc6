"""Every Kubernetes manifest under deploy/ is valid, consistent, and runs what the package ships.

Checked: each object validates against the Kubernetes schemas (kubernetes-validate,
strict: unknown fields are errors) for the oldest and newest versions we
support; images are the one the Dockerfile builds; ConfigMaps (and their keys),
PVCs, Services and ServiceAccounts referenced are defined (Secrets are the
operator's, and must be the documented ones); every Service selects some pod
and targets a port it declares; every pod runs as the image's user with an
fsGroup, resource requests and limits, a read-only root and a writable /tmp;
every component has a NetworkPolicy that opens exactly ports its pods declare;
every command is a real sub-command whose config file and per-pod variables
build a valid configuration; adapter groups keep their members on different
nodes and their keys are bound to their own adapters; each group has its own
key secret and each pod mounts only its own key; the Spark driver lives in a
namespace of its own with the least role; probes have listeners of their own.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from feedha import settings
from feedha.cli import COMMANDS

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
IMAGE = "feedha:latest"
UID = 10001  # the image's user (deploy/Dockerfile)
# The oldest Kubernetes the manifests need (StatefulSet ordinals and the pod-index label are
# on by default from 1.28) and the newest schema kubernetes-validate ships.
K8S_VERSIONS = ("1.28.0", kubernetes_validate.latest_version())
OPERATOR_SECRETS = {
    "feedha-admin-tls": {"tls.crt", "tls.key"},
    "feedha-admin-ca": {"ca.crt"},
    "feedha-adapter-key-eq-a-m": {"key-id", "secret"},
    "feedha-adapter-key-eq-n-z": {"key-id", "secret"},
    "feedha-curve-eq-a-m": {"adapter-1.key", "adapter-2.key", "adapter-3.key", "sync.key"},
    "feedha-curve-eq-n-z": {"adapter-1.key", "adapter-2.key", "adapter-3.key", "sync.key"},
    "feedha-source-public": {"source.key.pub"},
    "feedha-feed-curve": {"source.key"},
    "feedha-feed-allowed": {"adapters.pub"},
}  # created by hand (deploy/k8s/config.yaml says how)
FEED_NAMESPACE = "feedha-feed"
WORKLOADS = {"Deployment", "StatefulSet", "Pod"}


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
    spec: dict[str, Any] = doc["spec"] if doc["kind"] == "Pod" else doc["spec"]["template"]["spec"]
    return spec


def _pod_labels(doc: dict[str, Any]) -> dict[str, str]:
    meta = doc["metadata"] if doc["kind"] == "Pod" else doc["spec"]["template"]["metadata"]
    return dict(meta.get("labels", {}))


def _named(kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in DOCS if d["kind"] == kind}


def _workloads() -> list[dict[str, Any]]:
    return [d for d in DOCS if d["kind"] in WORKLOADS]


def _containers() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(doc, c) for doc in _workloads() for c in _pod_spec(doc)["containers"]]


def _ports(labels: dict[str, str]) -> set[int]:
    """The container ports of the workloads whose pods carry ``labels``."""
    return {
        port["containerPort"]
        for doc in _workloads()
        if labels.items() <= _pod_labels(doc).items()
        for container in _pod_spec(doc)["containers"]
        for port in container.get("ports", [])
    }


def test_every_manifest_is_listed_and_parses() -> None:
    listed = set(yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"])
    on_disk = {str(p.relative_to(DEPLOY)) for p in (DEPLOY / "k8s").glob("*.yaml")}
    on_disk |= {str(p.relative_to(DEPLOY)) for p in (DEPLOY / "spark").glob("*.yaml")}
    assert on_disk <= listed
    assert all("apiVersion" in d and "kind" in d and "name" in d["metadata"] for d in DOCS)
    kinds = {d["kind"] for d in DOCS}
    assert {"Deployment", "StatefulSet", "Service", "ConfigMap", "NetworkPolicy"} <= kinds


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("doc", DOCS, ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_manifests_validate_against_the_kubernetes_schemas(doc: dict[str, Any], version: str) -> None:
    kubernetes_validate.validate(doc, version, strict=True)


def test_the_validator_would_catch_a_mistake() -> None:
    (group, *_rest) = [d for d in DOCS if d["kind"] == "StatefulSet"]
    broken = copy.deepcopy(group)
    broken["spec"]["template"]["spec"]["containers"][0]["resources"]["limit"] = {"cpu": "1"}  # limits
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSIONS[0], strict=True)


def test_images_are_built_by_the_dockerfile() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert IMAGE in dockerfile  # the build command names the tag
    for doc, container in _containers():
        assert container["image"] == IMAGE, doc["metadata"]["name"]
        # Files of the image that a command names: /opt/spark/bin/spark-submit, local:///opt/feedha/...
        for word in _argv(container):
            path = word.removeprefix("local://")
            if path.startswith("/opt/"):
                assert path.removesuffix("/bin/spark-submit") in dockerfile, word


def test_referenced_objects_exist() -> None:
    configmaps, claims, services = _named("ConfigMap"), _named("PersistentVolumeClaim"), _named("Service")
    for doc in _workloads():
        spec = _pod_spec(doc)
        templates = {t["metadata"]["name"] for t in doc.get("spec", {}).get("volumeClaimTemplates", [])}
        volumes = {v["name"] for v in spec.get("volumes", [])} | templates
        for volume in spec.get("volumes", []):
            if "configMap" in volume:
                data = configmaps[volume["configMap"]["name"]]["data"]
                assert {item["key"] for item in volume["configMap"].get("items", [])} <= set(data)
            if "persistentVolumeClaim" in volume:
                assert volume["persistentVolumeClaim"]["claimName"] in claims
            if "secret" in volume:
                name = volume["secret"]["secretName"]
                assert name in OPERATOR_SECRETS
                assert {item["key"] for item in volume["secret"].get("items", [])} <= OPERATOR_SECRETS[name]
        if "serviceAccountName" in spec:
            assert spec["serviceAccountName"] in _named("ServiceAccount")
        for container in spec["containers"]:
            for mount in container.get("volumeMounts", []):
                assert mount["name"] in volumes
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["key"] in OPERATOR_SECRETS[ref["name"]]
        if doc["kind"] == "StatefulSet":
            governing = services[doc["spec"]["serviceName"]]
            assert governing["spec"].get("clusterIP") == "None"  # headless: stable per-pod names
    text = "\n".join(yaml.safe_dump(d) for d in DOCS)
    hosts = re.findall(r"tcp://([a-z][a-z0-9.-]*):", text) + re.findall(r"admin: ([a-z-]+):", text)
    for host in hosts:
        labels = host.split(".")  # service[.namespace] or pod.service
        assert labels[0] in services or (len(labels) > 1 and labels[1] in services), host


def test_services_select_pods_and_target_their_ports() -> None:
    for service in _named("Service").values():
        selector = service["spec"]["selector"]
        declared = _ports(selector)
        assert declared, f"service {service['metadata']['name']} selects no pod"
        for port in service["spec"]["ports"]:
            assert port.get("targetPort", port["port"]) in declared, service["metadata"]["name"]


@pytest.mark.parametrize("doc", _workloads(), ids=lambda d: d["metadata"]["name"])
def test_pods_run_as_the_image_user_with_limits_and_a_read_only_root(doc: dict[str, Any]) -> None:
    spec = _pod_spec(doc)
    context = spec["securityContext"]
    assert context["runAsNonRoot"] and context["runAsUser"] == UID and context["fsGroup"] == UID
    assert (DEPLOY / "Dockerfile").read_text().count(f"{UID}") >= 2  # the image's uid and gid
    for container in spec["containers"]:
        resources = container["resources"]
        for kind in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(resources[kind]), (doc["metadata"]["name"], kind)
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert "/tmp" in {m["mountPath"] for m in container["volumeMounts"]}


def test_adapters_have_guaranteed_whole_cores() -> None:
    for doc, container in _containers():
        if _pod_labels(doc).get("app") == "feedha-adapter":
            resources = container["resources"]
            assert resources["requests"] == resources["limits"]
            assert float(resources["limits"]["cpu"]).is_integer()


def test_every_component_has_a_network_policy_over_its_own_ports() -> None:
    policies = list(_named("NetworkPolicy").values())
    for doc in _workloads():
        labels = _pod_labels(doc)
        assert any(p["spec"]["podSelector"]["matchLabels"].items() <= labels.items() for p in policies), (
            labels
        )
    executors = {"app": "feedha-feed-executor"}  # the driver labels its executor pods so
    assert any(
        "--conf=spark.kubernetes.executor.label.app=feedha-feed-executor" in _argv(c)
        for _d, c in _containers()
    )
    for policy in policies:
        selected = policy["spec"]["podSelector"]["matchLabels"]
        own = _ports(selected)
        assert own or selected == executors, policy["metadata"]["name"]
        for rule in policy["spec"].get("ingress", []):
            for port in rule.get("ports", []):
                assert port["port"] in own, (policy["metadata"]["name"], port)
            for peer in rule.get("from", []):
                if "podSelector" not in peer:  # Prometheus, from any namespace: /metrics only
                    assert peer == {"namespaceSelector": {}}, (policy["metadata"]["name"], peer)
                    assert {p["port"] for p in rule["ports"]} == {9100}, policy["metadata"]["name"]
                    continue
                assert (
                    _ports(peer["podSelector"]["matchLabels"])
                    or peer["podSelector"]["matchLabels"] == executors
                )
        for rule in policy["spec"].get("egress", []):
            for peer in rule.get("to", []):
                reachable = _ports(peer["podSelector"]["matchLabels"])
                assert {p["port"] for p in rule["ports"]} <= reachable, (policy["metadata"]["name"], rule)


def test_sync_buses_are_open_only_to_their_own_group() -> None:
    for policy in _named("NetworkPolicy").values():
        selected = policy["spec"]["podSelector"]["matchLabels"]
        if selected.get("app") != "feedha-adapter":
            continue
        for rule in policy["spec"]["ingress"]:
            if any(p["port"] == 6002 for p in rule.get("ports", [])):
                assert [peer["podSelector"]["matchLabels"] for peer in rule["from"]] == [selected]


def test_the_spark_driver_is_a_statefulset_of_one() -> None:
    (driver,) = [d for d in _workloads() if _pod_labels(d).get("app") == "feedha-feed-driver"]
    assert driver["kind"] == "StatefulSet" and driver["spec"]["replicas"] == 1
    assert "checkpoint" in {t["metadata"]["name"] for t in driver["spec"]["volumeClaimTemplates"]}


# -- commands and their config files -----------------------------------------------------


def _expand(value: str, env: dict[str, str]) -> str:
    # Kubernetes' dependent variables: $(NAME) is the value of an earlier variable.
    return re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), value)


def _pod_environment(container: dict[str, Any], index: int) -> dict[str, str]:
    """The container's variables in pod ``index``: fields resolved, secrets replaced by placeholders."""
    env: dict[str, str] = {}
    for item in container.get("env", []):
        source = item.get("valueFrom", {})
        if "value" in item:
            env[item["name"]] = _expand(item["value"], env)
        elif "fieldRef" in source:
            path = source["fieldRef"]["fieldPath"]
            assert path in ("status.podIP", "metadata.labels['apps.kubernetes.io/pod-index']"), path
            env[item["name"]] = f"10.1.0.{index}" if path == "status.podIP" else str(index)
        elif "secretKeyRef" in source:
            env[item["name"]] = f"<{source['secretKeyRef']['key']}>"
    return env


def _config_file(doc: dict[str, Any], container: dict[str, Any], path: str, tmp: Path) -> Path:
    """Write the ConfigMap item mounted at ``path`` to ``tmp`` (same name) and return it."""
    directory, name = path.rsplit("/", 1)
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == directory]
    (volume,) = [v for v in _pod_spec(doc)["volumes"] if v["name"] == mount["name"]]
    source = volume["configMap"]
    keys = {item["path"]: item["key"] for item in source.get("items", [])} or {name: name}
    data = _named("ConfigMap")[source["name"]]["data"]
    target = tmp / directory.strip("/") / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(data[keys[name]])
    for item, key in keys.items():  # files the config names beside it (the policy)
        (target.parent / item).write_text(data[key])
    return target


def _argv(container: dict[str, Any]) -> list[str]:
    return [str(word) for word in [*container.get("command", []), *container.get("args", [])]]


def _ordinals(doc: dict[str, Any]) -> range:
    if doc["kind"] != "StatefulSet":
        return range(0, 1)
    start = doc["spec"].get("ordinals", {}).get("start", 0)
    return range(start, start + doc["spec"]["replicas"])


def _settings(doc: dict[str, Any], container: dict[str, Any], index: int, tmp: Path) -> settings.Settings:
    argv = _argv(container)
    env = _pod_environment(container, index)
    if argv[:3] == ["python", "-m", "feedha.spark_feed.submit"]:  # the feed's stop-forwarding wrapper
        argv = argv[3:]
    if argv[0] == "/opt/spark/bin/spark-submit":  # the job's arguments follow its .py file
        argv = ["feedha", "feed", *argv[[a.endswith(".py") for a in argv].index(True) + 1 :]]
    assert argv[0] in ("feedha", "feedctl") and argv[1] in COMMANDS, argv
    config = next((a.split("=", 1)[1] for a in argv if a.startswith("--config=")), None)
    if "--config" in argv:
        config = argv[argv.index("--config") + 1]
    assert config is not None, f"{doc['metadata']['name']} runs without a config file"
    local = _config_file(doc, container, config, tmp)
    rest = [a for a in argv[2:] if a != config and not a.startswith("--config")]
    if argv[1] == "adapter":
        from feedha.adapter.__main__ import build_parser
    elif argv[1] == "admin-server":
        from feedha.admin_server.server import _parser as build_parser  # type: ignore[assignment]
    else:
        from feedha.spark_feed.config import build_parser  # type: ignore[assignment]
    from feedha.admin_server.config import SECTIONS

    sections = SECTIONS if argv[1] == "admin-server" else frozenset()
    return settings.parse(build_parser(), ["--config", str(local), *rest], environ=env, sections=sections)


def test_every_command_builds_its_configuration_from_its_file_and_pod(tmp_path: Path) -> None:
    from feedha.adapter.__main__ import config_from_args
    from feedha.admin_server.server import _build_config
    from feedha.spark_feed.config import _config

    seen = set()
    for doc, container in _containers():
        for index in _ordinals(doc):
            found = _settings(doc, container, index, tmp_path / f"{doc['metadata']['name']}-{index}")
            args = found.args
            if hasattr(args, "channel_number"):  # an adapter
                seen.add("adapter")
                config = config_from_args(args, admin_secret="<secret>")
                assert config.adapter == index and config.want_active == (index == 1)
                assert config.line_endpoint == f"tcp://10.1.0.{index}:6001"
                assert config.replay_endpoint and config.journal_dir is not None
                assert len(config.peers) == len(_group(doc)) - 1
                assert all(f"-{index}." not in peer for peer in config.peers)  # never itself
                assert config.curve_key == Path("/etc/feedha/keys/adapter.key")
                assert config.sync_key is not None and config.source_key is not None
                assert not config.insecure
                assert config.admin and config.admin_tls_ca is not None and config.admin_credentials
            elif hasattr(args, "token_ttl"):
                seen.add("admin-server")
                server = _build_config(args, found.sections)
                assert server.has_tls and server.port == 50051 and len(server.channels) == 2
            else:
                seen.add("feed")
                feed = _config(args)
                assert feed.master is None and dict(feed.endpoints).keys() == {"A-M", "N-Z"}
                assert feed.curve_key and feed.allowed_keys and not feed.insecure
            assert args.log_format == "json"
    assert seen == {"adapter", "admin-server", "feed"}


def test_each_adapters_memory_budget_fits_its_pod_with_headroom_and_its_group_alike(tmp_path: Path) -> None:
    # The budget defaults from the container's limit (cgroup): the tables refuse before the
    # adapter reaches it, so an adapter never meets its pod's limit and is never OOM-killed.
    from feedha.adapter.__main__ import config_from_args
    from feedha.adapter.conversion.budget import BASE_BYTES, MEMORY_HEADROOM, ORDER_BYTES, parse_size

    budgets: dict[str, set[int]] = {}
    for doc in _adapter_sets():
        (container,) = _pod_spec(doc)["containers"]
        limit = parse_size(container["resources"]["limits"]["memory"])
        (index,) = _ordinals(doc)
        args = _settings(doc, container, index, tmp_path / f"{doc['metadata']['name']}").args
        config = config_from_args(args, admin_secret="<secret>", container_memory=limit)
        assert config.memory_budget == int(limit * MEMORY_HEADROOM) <= limit - 256 * 2**20
        assert config.table_budget == config.memory_budget - BASE_BYTES
        assert config.table_budget // ORDER_BYTES >= 2_000_000  # live orders an itch50 pod holds
        budgets.setdefault(_pod_labels(doc)["feedha/channel"], set()).add(config.memory_budget)
    assert budgets and all(len(group) == 1 for group in budgets.values()), budgets


@pytest.mark.parametrize(
    "group",
    [d for d in DOCS if d["kind"] == "StatefulSet" and _pod_labels(d).get("app") == "feedha-adapter"],
    ids=lambda d: d["metadata"]["name"],
)
def test_adapter_groups_never_share_a_node(group: dict[str, Any]) -> None:
    rules = _pod_spec(group)["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    labels = _pod_labels(group)
    assert any(
        r["topologyKey"] == "kubernetes.io/hostname"
        and r["labelSelector"]["matchLabels"].items() <= labels.items()
        for r in rules
    )
    assert len(_group(group)) >= 2


def _group(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The StatefulSets of the adapter group ``doc`` belongs to (one per adapter)."""
    channel = _pod_labels(doc)["feedha/channel"]
    return [d for d in DOCS if d["kind"] == "StatefulSet" and _pod_labels(d).get("feedha/channel") == channel]


def _adapter_sets() -> list[dict[str, Any]]:
    return [d for d in DOCS if d["kind"] == "StatefulSet" and _pod_labels(d).get("app") == "feedha-adapter"]


def test_each_group_has_its_own_key_secret_and_each_pod_mounts_only_its_own_key() -> None:
    secrets_by_group: dict[str, set[str]] = {}
    for doc in _adapter_sets():
        (index,) = _ordinals(doc)  # one adapter per StatefulSet: its template is its own
        (keys,) = [v for v in _pod_spec(doc)["volumes"] if v["name"] == "keys"]
        channel = _pod_labels(doc)["feedha/channel"]
        secrets_by_group.setdefault(channel, set()).add(keys["secret"]["secretName"])
        items = {(item["key"], item["path"]) for item in keys["secret"]["items"]}
        assert items == {(f"adapter-{index}.key", "adapter.key"), ("sync.key", "sync.key")}, doc["metadata"]
        mounted = {v["secret"]["secretName"] for v in _pod_spec(doc)["volumes"] if "secret" in v}
        assert not any(name.startswith("feedha-curve-") and channel not in name for name in mounted)
    assert {len(names) for names in secrets_by_group.values()} == {1}  # one secret per group ...
    assert len({next(iter(names)) for names in secrets_by_group.values()}) == len(secrets_by_group)  # each


def test_the_spark_driver_has_a_namespace_of_its_own_and_the_least_role() -> None:
    (namespace,) = [d for d in DOCS if d["kind"] == "Namespace"]
    assert namespace["metadata"]["name"] == FEED_NAMESPACE
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    feed = [
        d
        for d in DOCS
        if d["metadata"]["name"].startswith(("feedha-feed", "feedha-spark")) and d["kind"] != "Namespace"
    ]
    assert feed and {d["metadata"].get("namespace") for d in feed} == {FEED_NAMESPACE}  # all of it there
    assert all(d in feed for d in DOCS if d["metadata"].get("namespace") == FEED_NAMESPACE)  # and only it
    (role,) = [d for d in DOCS if d["kind"] == "Role"]
    assert role["metadata"]["namespace"] == FEED_NAMESPACE
    assert not [d for d in DOCS if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    resources = {r for rule in role["rules"] for r in rule["resources"]}
    assert resources == {"pods", "configmaps"}  # no services, secrets, volume claims
    assert all(rule["apiGroups"] == [""] for rule in role["rules"])
    executor = _named("ServiceAccount")["feedha-spark-executor"]
    assert executor["automountServiceAccountToken"] is False
    (driver,) = [d for d in _workloads() if _pod_labels(d).get("app") == "feedha-feed-driver"]
    argv = _argv(_pod_spec(driver)["containers"][0])
    assert f"--conf=spark.kubernetes.namespace={FEED_NAMESPACE}" in argv
    assert "--conf=spark.kubernetes.authenticate.executor.serviceAccountName=feedha-spark-executor" in argv


def test_adapters_verify_the_admin_server_and_their_key_is_bound_to_their_group(tmp_path: Path) -> None:
    """Every adapter reaches the admin server over TLS, with a key the policy binds to its own adapters."""
    from feedha.adapter.__main__ import config_from_args
    from feedha.admin_server.policy import Principal, parse_policy

    (config,) = [d for d in DOCS if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "feedha-config"]
    policy = parse_policy(config["data"]["policy.yaml"], source="feedha-config/policy.yaml")
    channels = {c for binding in policy.adapters.values() for c in binding.channels}
    groups = [d for d in DOCS if d["kind"] == "StatefulSet" and _pod_labels(d).get("app") == "feedha-adapter"]
    assert groups
    for doc in groups:
        (container,) = _pod_spec(doc)["containers"]
        refs = {e["name"]: e.get("valueFrom", {}).get("secretKeyRef", {}) for e in container["env"]}
        # the group's own key: secret feedha-adapter-key-eq-a-m holds user feed-eq-a-m's key
        user = refs["FEEDHA_ADMIN_KEY_ID"]["name"].replace("feedha-adapter-key-", "feed-")
        assert refs["FEEDHA_ADAPTER_SECRET"]["name"] == refs["FEEDHA_ADMIN_KEY_ID"]["name"]
        for index in _ordinals(doc):
            adapter = config_from_args(_settings(doc, container, index, tmp_path / str(index)).args)
            assert adapter.admin_tls_ca is not None, doc["metadata"]["name"]
            principal = Principal(user=user)
            assert policy.may_register(principal, channel_name=adapter.channel, adapter_id=adapter.adapter_id)
            for other in channels - {adapter.channel}:
                assert not policy.may_register(principal, channel_name=other, adapter_id=f"{other}.1")


def test_daemons_are_probed_on_their_health_endpoints() -> None:
    # On listeners of their own (config: health), never the metrics and status page's.
    probed, health_ports = 0, {"admin-server": 9201, "adapter": 9101}
    for doc in _workloads():
        for container in _pod_spec(doc)["containers"]:
            if container["name"] not in ("admin-server", "adapter"):
                continue
            ports = {p["containerPort"] for p in container.get("ports", [])}
            for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
                check = container[probe]["httpGet"]
                assert check["path"] == path and check["port"] in ports, (doc["metadata"]["name"], probe)
                assert check["port"] == health_ports[container["name"]]
            probed += 1
    assert probed == 1 + len(_adapter_sets())  # the admin server and every adapter


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
