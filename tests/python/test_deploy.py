"""Offline validation of deploy/: the kustomize manifests rendered the way kustomize would
(namespace, labels, image) and every object checked against the Kubernetes OpenAPI schemas
bundled in the `kubernetes-validate` package (strict: unknown fields fail), plus the
properties the cluster design relies on (per-pod WAL volume, preStop drain inside the grace
period, HPA on CPU and on the pods' load score), and the Dockerfile's stages and toolchain
(no older than the minimum Rust version the locked dependencies declare, read from
`cargo metadata`), its non-root user and its HEALTHCHECK (run against a real pod).
`kubectl kustomize` (kubectl must be installed) renders the base, which must equal this
file's renderer, and deploy/overlays/production (3-member etcd, ServiceMonitors).
"""

import json
import pathlib
import re
import subprocess

import kubernetes_validate
import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
KUBERNETES_VERSION = "1.33.0"
CLUSTER_SCOPED = {"Namespace"}


def render():
    """The objects `kubectl kustomize deploy/k8s` would print (for the features used here)."""
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    allowed = {"apiVersion", "kind", "namespace", "labels", "resources", "images"}
    assert set(kustomization) <= allowed, f"unhandled kustomize fields: {set(kustomization) - allowed}"
    images = {i["name"]: f'{i["newName"]}:{i["newTag"]}' for i in kustomization.get("images", [])}
    labels = {}
    for entry in kustomization.get("labels", []):
        labels.update(entry["pairs"])
    objects = []
    for resource in kustomization["resources"]:
        for doc in yaml.safe_load_all((K8S / resource).read_text()):
            if doc is None:
                continue
            meta = doc.setdefault("metadata", {})
            if doc["kind"] not in CLUSTER_SCOPED:
                meta["namespace"] = kustomization["namespace"]
            meta.setdefault("labels", {}).update(labels)
            spec = doc.get("spec", {}).get("template", {}).get("spec", {})
            for container in spec.get("containers", []):
                container["image"] = images.get(container["image"], container["image"])
            objects.append(doc)
    return objects


OBJECTS = render()


def by_kind(kind, name):
    matches = [o for o in OBJECTS if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} objects"
    return matches[0]


@pytest.mark.parametrize(
    "obj", OBJECTS, ids=[f'{o["kind"]}/{o["metadata"]["name"]}' for o in OBJECTS]
)
def test_every_object_matches_the_kubernetes_schema(obj):
    kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_a_bad_object_is_refused_by_the_validator():
    bad = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "x"},
           "spec": {"replicas": "three"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, KUBERNETES_VERSION, strict=True)


def test_each_sluice_pod_has_its_own_wal_volume_and_drains_before_it_stops():
    sts = by_kind("StatefulSet", "sluice")
    claims = {c["metadata"]["name"] for c in sts["spec"]["volumeClaimTemplates"]}
    pod = sts["spec"]["template"]["spec"]
    container = pod["containers"][0]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert "wal" in claims and mounts["wal"] == "/var/lib/sluice"
    assert "--data-dir=/var/lib/sluice" in container["args"]
    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[1:3] == ["pod", "drain"]
    grace = next(int(a.split("=")[1].rstrip("s")) for a in container["args"] if a.startswith("--drain-grace="))
    timeout = next(int(a.split("=")[1].rstrip("s")) for a in pre_stop if a.startswith("--timeout="))
    assert grace < timeout < pod["terminationGracePeriodSeconds"]
    assert container["image"].startswith("ghcr.io/sluice/sluice:")


def test_the_router_and_the_pods_join_the_same_etcd():
    config = by_kind("ConfigMap", "sluice")["data"]
    assert config["SLUICE_JOIN"].startswith("etcds://etcd-0.etcd:")
    for kind, name in [("StatefulSet", "sluice"), ("Deployment", "sluice-router")]:
        container = by_kind(kind, name)["spec"]["template"]["spec"]["containers"][0]
        assert {"configMapRef": {"name": "sluice"}} in container["envFrom"]
    assert by_kind("Deployment", "sluice-router")["spec"]["template"]["spec"]["containers"][0]["args"][0] == "router"


def secret_mounts(pod_spec, container):
    """mount path -> (secret name, the keys mounted) of a container's Secret volumes."""
    volumes = {v["name"]: v["secret"] for v in pod_spec.get("volumes", []) if "secret" in v}
    return {
        m["mountPath"]: (volumes[m["name"]]["secretName"],
                         {i["key"] for i in volumes[m["name"]].get("items", [])})
        for m in container.get("volumeMounts", []) if m["name"] in volumes
    }


def server_env_names():
    """Every `env = "..."` a clap flag of the server reads."""
    sources = "".join(p.read_text() for p in (ROOT / "server" / "src").rglob("*.rs"))
    return set(re.findall(r'env = "([A-Z_]+)"', sources))


def test_pods_router_and_drain_reach_etcd_over_tls_with_a_client_certificate_and_a_password():
    config = by_kind("ConfigMap", "sluice")["data"]
    names = server_env_names()
    for var in ["SLUICE_ETCD_CA", "SLUICE_ETCD_CERT", "SLUICE_ETCD_KEY",
                "SLUICE_ETCD_USER", "SLUICE_ETCD_PASSWORD"]:
        assert var in names, f"no flag of sluice reads {var}"
    etcd_secret = by_kind("Secret", "sluice-etcd")["stringData"]
    assert set(etcd_secret) == {"SLUICE_ETCD_USER", "SLUICE_ETCD_PASSWORD"}
    for kind, name in [("StatefulSet", "sluice"), ("Deployment", "sluice-router")]:
        pod = by_kind(kind, name)["spec"]["template"]["spec"]
        container = pod["containers"][0]
        assert {"secretRef": {"name": "sluice-etcd"}} in container["envFrom"]
        assert {"secretRef": {"name": "etcd-root"}} not in container["envFrom"]
        mounts = secret_mounts(pod, container)
        for var, key in [("SLUICE_ETCD_CA", "ca.crt"), ("SLUICE_ETCD_CERT", "client.crt"),
                         ("SLUICE_ETCD_KEY", "client.key")]:
            directory, file = config[var].rsplit("/", 1)
            assert file == key and mounts[directory] == ("etcd-tls", {"ca.crt", "client.crt", "client.key"}), (
                f"{name}: {config[var]} is not mounted from Secret etcd-tls")
    # etcd itself: TLS only, client certificates required, its server key mounted, the
    # probe on the plain metrics port; the Job turns on user authentication.
    etcd_pod = by_kind("StatefulSet", "etcd")["spec"]["template"]["spec"]
    etcd = etcd_pod["containers"][0]
    flags = dict(a.split("=", 1) if "=" in a else (a, "") for a in etcd["command"][1:])
    assert flags["--listen-client-urls"].startswith("https://")
    assert "--client-cert-auth" in flags
    assert secret_mounts(etcd_pod, etcd)["/etc/etcd/tls"] == (
        "etcd-tls", {"ca.crt", "server.crt", "server.key"})
    for flag in ["--cert-file", "--key-file", "--trusted-ca-file"]:
        assert flags[flag].startswith("/etc/etcd/tls/")
    probe_port = etcd["readinessProbe"]["httpGet"]["port"]
    assert flags["--listen-metrics-urls"].startswith("http://") and flags["--listen-metrics-urls"].endswith(f":{probe_port}")
    job = by_kind("Job", "etcd-auth")["spec"]["template"]["spec"]["containers"][0]
    script = job["command"][-1]
    assert "auth enable" in script and "readwrite /sluice/" in script
    assert {"secretRef": {"name": "etcd-root"}} in job["envFrom"]


def test_the_autoscaler_uses_cpu_and_the_load_score_the_pods_export():
    hpa = by_kind("HorizontalPodAutoscaler", "sluice")
    kinds = {m["type"]: m for m in hpa["spec"]["metrics"]}
    assert kinds["Resource"]["resource"]["name"] == "cpu"
    metric = kinds["Pods"]["pods"]["metric"]["name"]
    sources = [p.read_text() for p in (ROOT / "server" / "src").rglob("*.rs")]
    assert any(f'gauge!("{metric}")' in s for s in sources), f"no pod exports {metric}"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "sluice"}


def dockerfile_stages():
    """(image, stage name) of each FROM line of deploy/Dockerfile."""
    text = (ROOT / "deploy" / "Dockerfile").read_text()
    return text, re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?", text, re.MULTILINE)


def test_the_dockerfile_builds_in_one_stage_and_runs_from_a_slim_one():
    text, stages = dockerfile_stages()
    assert len(stages) == 2 and stages[0][1] == "build"
    assert "COPY --from=build /src/target/release/sluice" in text


def version(text):
    """'1.95' or '1.91.1' as a comparable (major, minor, patch)."""
    parts = [int(p) for p in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def cargo_metadata():
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--locked"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out)


def test_rust_version_and_the_docker_toolchain_can_build_the_locked_dependencies():
    meta = cargo_metadata()
    members = set(meta["workspace_members"])
    declared = {p["name"]: p["rust_version"] for p in meta["packages"] if p["id"] in members}
    needed = max(
        (version(p["rust_version"]), p["name"])
        for p in meta["packages"]
        if p["id"] not in members and p.get("rust_version")
    )
    for name, rust_version in declared.items():
        assert rust_version, f"{name} declares no rust-version"
        assert version(rust_version) >= needed[0], (
            f"{name}: rust-version {rust_version} is below {needed[1]}'s {needed[0]}")
    image = dockerfile_stages()[1][0][0]
    toolchain = re.fullmatch(r"rust:(\d+\.\d+(?:\.\d+)?)(?:-\S+)?", image)
    assert toolchain, f"the build stage's image {image} names no Rust version"
    assert version(toolchain.group(1)) >= needed[0], (
        f"{image} cannot build {needed[1]} (needs Rust {needed[0]})")


def serve_env_vars():
    """The environment variables `sluice serve` reads, from its own `--help` ([env: X])."""
    import os
    binary = os.environ.get("SLUICE_BIN", str(ROOT / "target" / "debug" / "sluice"))
    out = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True, check=True)
    return set(re.findall(r"\[env: ([A-Z0-9_]+)", out.stdout))


def pod_env(sts):
    """Names of the environment the StatefulSet's pods get, with where each comes from."""
    container = sts["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("valueFrom", e.get("value")) for e in container.get("env", [])}
    for source in container.get("envFrom", []):
        ref = source.get("configMapRef") or source.get("secretRef")
        kind = "ConfigMap" if "configMapRef" in source else "Secret"
        obj = by_kind(kind, ref["name"])
        for name in {**obj.get("data", {}), **obj.get("stringData", {})}:
            env.setdefault(name, {kind: ref["name"]})
    return env


def test_the_pods_get_every_s3_variable_the_server_reads_with_minio_credentials_from_its_secret():
    s3_vars = {v for v in serve_env_vars() if v.startswith("AWS_")}
    assert {"AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
            "AWS_ALLOW_HTTP"} <= s3_vars, s3_vars
    env = pod_env(by_kind("StatefulSet", "sluice"))
    missing = s3_vars - set(env)
    assert not missing, f"the pods lack {missing}"
    config = by_kind("ConfigMap", "sluice")["data"]
    assert config["AWS_ALLOW_HTTP"] == "true" and config["AWS_ENDPOINT_URL"].startswith("http://minio:")
    minio = by_kind("Secret", "minio")["stringData"]
    for var, key in (("AWS_ACCESS_KEY_ID", "MINIO_ROOT_USER"), ("AWS_SECRET_ACCESS_KEY", "MINIO_ROOT_PASSWORD")):
        assert env[var] == {"secretKeyRef": {"name": "minio", "key": key}}, env[var]
        assert key in minio


def test_a_job_creates_the_warehouse_bucket_in_minio():
    bucket = by_kind("ConfigMap", "sluice")["data"]["SLUICE_WAREHOUSE"].removeprefix("s3://").split("/")[0]
    job = by_kind("Job", "minio-bucket")["spec"]
    container = job["template"]["spec"]["containers"][0]
    script = " ".join(container["args"])
    assert f"mc mb --ignore-existing warehouse/{bucket}" in script
    assert "http://minio:9000" in script
    assert {"secretRef": {"name": "minio"}} in container["envFrom"]
    assert job["backoffLimit"] >= 10, "retried until MinIO is up"


def test_disruptions_take_one_sluice_pod_at_a_time():
    pdb = by_kind("PodDisruptionBudget", "sluice")["spec"]
    sts = by_kind("StatefulSet", "sluice")
    assert pdb["maxUnavailable"] == 1
    assert pdb["selector"]["matchLabels"] == sts["spec"]["selector"]["matchLabels"]


def test_the_router_is_ready_with_a_placeable_pod_and_live_while_it_reads_etcd():
    router = by_kind("Deployment", "sluice-router")["spec"]["template"]["spec"]["containers"][0]
    assert router["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert router["livenessProbe"]["httpGet"]["path"] == "/healthz"


def test_prometheus_adapter_serves_the_hpa_its_pods_metric():
    metric = next(m["pods"]["metric"]["name"] for m in by_kind("HorizontalPodAutoscaler", "sluice")["spec"]["metrics"]
                  if m["type"] == "Pods")
    config = yaml.safe_load(by_kind("ConfigMap", "sluice-prometheus-adapter")["data"]["config.yaml"])
    rules = [r for r in config["rules"] if re.match(r"\s*([a-zA-Z_:][a-zA-Z0-9_:]*)", r["seriesQuery"]).group(1) == metric]
    assert len(rules) == 1, config
    rule = rules[0]
    assert re.fullmatch(rule["name"]["matches"], metric) and rule["name"]["as"] == metric
    assert rule["resources"]["overrides"] == {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}
    for marker in ("<<.Series>>", "<<.LabelMatchers>>", "<<.GroupBy>>"):
        assert marker in rule["metricsQuery"]


def kubectl_kustomize(path):
    """The objects `kubectl kustomize PATH` prints (kubectl must be on PATH)."""
    import shutil
    kubectl = shutil.which("kubectl")
    assert kubectl is not None, "kubectl not installed (it renders the kustomizations)"
    out = subprocess.run([kubectl, "kustomize", str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def key(obj):
    return obj["kind"], obj["metadata"]["name"]


def test_kubectl_kustomize_renders_the_base_as_the_offline_renderer_does():
    rendered = sorted(kubectl_kustomize(K8S), key=key)
    assert rendered == sorted(OBJECTS, key=key)


PRODUCTION = kubectl_kustomize(ROOT / "deploy" / "overlays" / "production") if __import__("shutil").which("kubectl") else []
OPERATOR_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}


def test_the_production_overlay_validates_and_adds_etcd_members_and_service_monitors():
    assert PRODUCTION, "kubectl not installed (it renders the kustomizations)"
    base = {key(o) for o in OBJECTS}
    added = {key(o) for o in PRODUCTION} - base
    assert added == {("PodDisruptionBudget", "etcd"), ("ServiceMonitor", "sluice-pods"),
                     ("ServiceMonitor", "sluice-router")}, added
    for obj in PRODUCTION:
        assert obj["kind"] == "Namespace" or obj["metadata"]["namespace"] == "sluice", key(obj)
        if (obj["apiVersion"], obj["kind"]) not in OPERATOR_KINDS:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    objects = {key(o): o for o in PRODUCTION}
    # etcd: three members, each named and addressed by its pod name, all in the initial cluster.
    etcd = objects[("StatefulSet", "etcd")]
    replicas = etcd["spec"]["replicas"]
    assert replicas == 3
    container = etcd["spec"]["template"]["spec"]["containers"][0]
    flags = dict(a.split("=", 1) for a in container["command"][1:] if "=" in a)
    members = dict(m.split("=", 1) for m in flags["--initial-cluster"].split(","))
    service = etcd["spec"]["serviceName"]
    assert members == {f"etcd-{i}": f"http://etcd-{i}.{service}:2380" for i in range(replicas)}
    assert flags["--name"] == "$(POD_NAME)" and flags["--initial-cluster-state"] == "new"
    assert {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}} in container["env"]
    assert flags["--advertise-client-urls"] == f"https://$(POD_NAME).{service}:2379"
    assert "--client-cert-auth" in container["command"], "the base's TLS flags are kept"
    join = objects[("ConfigMap", "sluice")]["data"]["SLUICE_JOIN"]
    assert join == "etcds://" + ",".join(f"etcd-{i}.{service}:2379" for i in range(replicas))
    pdb = objects[("PodDisruptionBudget", "etcd")]["spec"]
    assert pdb["maxUnavailable"] == 1 and pdb["selector"]["matchLabels"] == etcd["spec"]["selector"]["matchLabels"]
    # Each ServiceMonitor selects one Service, by a named port it has, whose pods serve /metrics.
    services = [o for o in PRODUCTION if o["kind"] == "Service"]
    workloads = {"sluice-pods": ("StatefulSet", "sluice"), "sluice-router": ("Deployment", "sluice-router")}
    for name, workload in workloads.items():
        monitor = objects[("ServiceMonitor", name)]["spec"]
        selected = [s for s in services
                    if monitor["selector"]["matchLabels"].items() <= s["metadata"].get("labels", {}).items()]
        assert len(selected) == 1, (name, [s["metadata"]["name"] for s in selected])
        svc = selected[0]["spec"]
        pods = objects[workload]["spec"]["template"]["metadata"]["labels"]
        assert svc["selector"].items() <= pods.items()
        for endpoint in monitor["endpoints"]:
            assert endpoint["path"] == "/metrics"
            port = next(p for p in svc["ports"] if p["name"] == endpoint["port"])
            target = port.get("targetPort", port["port"])
            ports = objects[workload]["spec"]["template"]["spec"]["containers"][0]["ports"]
            assert any(p["containerPort"] == target for p in ports), (name, target)


def test_every_container_requests_cpu_and_memory():
    for obj in OBJECTS + PRODUCTION:
        spec = obj.get("spec", {}).get("template", {}).get("spec", {})
        for container in spec.get("containers", []):
            requests = container.get("resources", {}).get("requests", {})
            assert {"cpu", "memory"} <= set(requests), f"{key(obj)}/{container['name']}: {requests}"


def test_the_runtime_image_runs_as_the_manifests_non_root_user():
    text, _ = dockerfile_stages()
    runtime = text.split("FROM debian", 1)[1]
    user = re.search(r"^USER\s+(\d+)\s*$", runtime, re.MULTILINE)
    assert user and int(user.group(1)) != 0
    assert f"--uid {user.group(1)}" in runtime
    for kind, name in [("StatefulSet", "sluice"), ("Deployment", "sluice-router")]:
        context = by_kind(kind, name)["spec"]["template"]["spec"]["securityContext"]
        assert context["runAsUser"] == int(user.group(1))


def healthcheck_command():
    """The Dockerfile's HEALTHCHECK CMD (exec form) and its environment defaults."""
    text, _ = dockerfile_stages()
    joined = text.replace("\\\n", " ")
    cmd = re.search(r"^HEALTHCHECK\s.*?CMD\s+(\[.*\])\s*$", joined, re.MULTILINE)
    assert cmd, "no HEALTHCHECK in the exec form"
    env = dict(re.findall(r"^ENV\s+([A-Z_]+)=(\S+)", text, re.MULTILINE))
    return json.loads(cmd.group(1)), env


def test_the_docker_healthcheck_passes_on_a_healthy_pod_and_fails_otherwise(server):
    import http.server
    import os
    import threading
    command, env = healthcheck_command()
    assert env["SLUICE_HEALTH_PORT"] == "50051"

    def check(port):
        return subprocess.run(command, env={**os.environ, "SLUICE_HEALTH_PORT": str(port)},
                              capture_output=True, timeout=10).returncode

    assert check(server.port) == 0

    class Unhealthy(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(503)
            self.end_headers()
            self.wfile.write(b'{"status":"unhealthy"}')

        def log_message(self, *args):
            pass

    sick = http.server.HTTPServer(("127.0.0.1", 0), Unhealthy)
    threading.Thread(target=sick.serve_forever, daemon=True).start()
    try:
        assert check(sick.server_address[1]) != 0, "a 503 /healthz must fail the check"
    finally:
        sick.shutdown()
    server.stop()
    assert check(server.port) != 0, "a pod that does not answer must fail the check"
