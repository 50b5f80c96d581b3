"""What no schema checks in ops/k8s and ops/docker-compose.yml (run by ops/check-ops):

- the kustomization lists every manifest here, and only those;
- each KEDA ScaledObject scales a Deployment defined here, with at least one replica kept;
  its Redis triggers watch the ready list of a queue that Deployment consumes, and its
  Prometheus triggers query only metrics the service exports;
- each worker Deployment names known queues, together they consume every queue, and its
  grace period outlasts PARLEY_WORKER_DRAIN_SECS;
- every container has probes and resource requests and limits, and runs as non-root;
- the compose file runs Postgres, Redis, an S3 store, the API and two workers, with health
  checks, and a worker stop grace period longer than the drain.
"""

import pathlib
import re
import sys

import yaml

OPS = pathlib.Path(__file__).resolve().parent.parent
ROOT = OPS.parent
errors = []


def check(ok, message):
    if not ok:
        errors.append(message)


def queues():
    text = (ROOT / "shared/jobs/src/lib.rs").read_text()
    # The names `QueueName::as_str` gives (not the Redis key names of `key_name`).
    body = text.split("pub fn as_str(self)", 1)[1].split("\n    }\n", 1)[0]
    return set(re.findall(r'QueueName::[A-Za-z]+ => "([a-z-]+)"', body))


def metric_names():
    text = (ROOT / "shared/types/src/metric_names.rs").read_text()
    return set(re.findall(r'"(parley_[a-z_]+)"', text))


QUEUES = queues()
METRICS = metric_names()
check(len(QUEUES) >= 4, f"queue names not found in shared/jobs/src/lib.rs: {QUEUES}")

k8s = OPS / "k8s"
docs = {}
for path in sorted(k8s.glob("*.yaml")):
    docs[path.name] = [d for d in yaml.safe_load_all(path.read_text()) if d]

kustomization = docs.pop("kustomization.yaml")[0]
check(
    set(kustomization["resources"]) == set(docs),
    f"kustomization resources {sorted(kustomization['resources'])} != files {sorted(docs)}",
)

objects = [d for ds in docs.values() for d in ds]
config = next(o for o in objects if o["kind"] == "ConfigMap")["data"]
drain = int(config.get("PARLEY_WORKER_DRAIN_SECS", "25"))
prefix = config.get("PARLEY_REDIS_PREFIX", "parley")
deployments = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Deployment"}


def consumed(deployment):
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    for env in container.get("env", []):
        if env["name"] == "PARLEY_WORKER_QUEUES":
            return set(env["value"].split(","))
    return None


all_consumed = set()
for name, d in deployments.items():
    pod = d["spec"]["template"]["spec"]
    for c in pod["containers"]:
        for probe in ("livenessProbe", "readinessProbe"):
            check(probe in c, f"{name}: {probe} missing")
        res = c.get("resources", {})
        check("requests" in res and "limits" in res, f"{name}: resources incomplete")
    check(pod.get("securityContext", {}).get("runAsNonRoot") is True, f"{name}: not non-root")
    qs = consumed(d)
    if name.startswith("parley-worker"):
        check(qs is not None, f"{name}: PARLEY_WORKER_QUEUES not set")
        qs = qs or set()
        check(qs <= QUEUES, f"{name}: unknown queues {qs - QUEUES}")
        all_consumed |= qs
        grace = pod.get("terminationGracePeriodSeconds", 30)
        check(grace > drain, f"{name}: grace {grace}s not longer than the {drain}s drain")
        pdbs = [o for o in objects if o["kind"] == "PodDisruptionBudget"
                and o["spec"]["selector"]["matchLabels"] == d["spec"]["selector"]["matchLabels"]]
        check(len(pdbs) == 1, f"{name}: no PodDisruptionBudget")
check(all_consumed == QUEUES, f"no worker consumes {QUEUES - all_consumed}")

scaled = [o for o in objects if o["kind"] == "ScaledObject"]
workers = {n for n in deployments if n.startswith("parley-worker")}
check({s["spec"]["scaleTargetRef"]["name"] for s in scaled} == workers,
      "every worker Deployment needs exactly one ScaledObject")
for s in scaled:
    target = s["spec"]["scaleTargetRef"]["name"]
    d = deployments.get(target)
    check(d is not None, f"{s['metadata']['name']}: no Deployment {target}")
    check(s["spec"].get("minReplicaCount", 0) >= 1,
          f"{target}: keep one replica (the ticker, relay and SLA scheduler run in workers)")
    for t in s["spec"]["triggers"]:
        if t["type"] == "redis":
            m = re.fullmatch(r"\{" + re.escape(prefix) + r":queue:([a-z-]+)\}:active", t["metadata"]["listName"])
            check(m is not None, f"{target}: list {t['metadata']['listName']} is no queue's ready list")
            if m and d is not None:
                check(m.group(1) in (consumed(d) or set()),
                      f"{target} scales on {m.group(1)}, which it does not consume")
        elif t["type"] == "prometheus":
            used = set(re.findall(r"parley_[a-z_]+", t["metadata"]["query"]))
            check(used <= METRICS, f"{target}: query uses unknown metrics {used - METRICS}")
        else:
            check(False, f"{target}: unexpected trigger {t['type']}")

compose = yaml.safe_load((OPS / "docker-compose.yml").read_text())
services = compose["services"]
for name in ("postgres", "redis", "s3", "api", "worker"):
    check(name in services, f"compose: no {name} service")
for name in ("postgres", "redis", "s3", "api", "worker"):
    check("healthcheck" in services.get(name, {}), f"compose: {name} has no health check")
check(services.get("worker", {}).get("deploy", {}).get("replicas") == 2, "compose: two workers")
grace = services.get("worker", {}).get("stop_grace_period", "10s")
check(int(grace.rstrip("s")) > drain, f"compose: worker stop_grace_period {grace} <= drain")

if errors:
    print("\n".join(f"ops consistency: {e}" for e in errors), file=sys.stderr)
    sys.exit(1)
print(f"ops consistency: {len(objects)} objects, {len(scaled)} ScaledObjects, compose: ok")
