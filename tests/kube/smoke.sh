#!/usr/bin/env bash
# Smoke test of the test clusters (ctest kube_smoke, needs the kube_v1 and
# kube_v1beta1 fixtures).
#
# v1 cluster (2 fake nodes x 8 gpu.example.com devices): the dra-example-driver
# claim-template and shared-claim examples and a 2-replica Deployment using a
# claim template are applied; the generated claims must exist and be
# allocated to devices published in the ResourceSlices, and every pod must be
# Running and Ready on a fake node.
# v1beta1 cluster: serves resource.k8s.io/v1beta1 and not v1, accepts the
# v1beta1 gpu-test4 example, and its shared claim is allocated (by the 1.33
# scheduler) and both pods run.
#
# Environment: DS_KUBECONFIG_V1, DS_KUBECONFIG_V1BETA1, DS_KUBE_BIN, DS_FIXTURES.
set -euo pipefail

for v in DS_KUBECONFIG_V1 DS_KUBECONFIG_V1BETA1 DS_KUBE_BIN DS_FIXTURES; do
  [ -n "${!v:-}" ] || { echo "smoke: $v is not set" >&2; exit 1; }
done
dra=$DS_FIXTURES/dra-example-driver
[ -d "$dra" ] || { echo "smoke: no fixtures at $dra" >&2; exit 1; }

k1() { "$DS_KUBE_BIN" kubectl --kubeconfig "$DS_KUBECONFIG_V1" "$@"; }
kb() { "$DS_KUBE_BIN" kubectl --kubeconfig "$DS_KUBECONFIG_V1BETA1" "$@"; }

tmp=$(mktemp -d)
namespaces_v1="basic-resourceclaimtemplate basic-shared-claim-across-pods kube-smoke-deployment"
cleanup() {
  local ns
  for ns in $namespaces_v1; do k1 delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true; done
  k1 delete namespace kube-smoke-job --ignore-not-found --wait=false >/dev/null 2>&1 || true
  kb delete namespace gpu-test4 --ignore-not-found --wait=false >/dev/null 2>&1 || true
  # Wait for the namespaces to go so later tests find the devices free.
  for ns in $namespaces_v1; do k1 wait --for=delete "namespace/$ns" --timeout=120s >/dev/null 2>&1 || true; done
  k1 wait --for=delete namespace/kube-smoke-job --timeout=120s >/dev/null 2>&1 || true
  kb wait --for=delete namespace/gpu-test4 --timeout=120s >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

fail=0
check() { # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then
    echo "ok - $what"
  else
    echo "not ok - $what"
    fail=1
  fi
}

echo "# v1 cluster"
k1 apply -f "$dra/v1/basic-resourceclaimtemplate.yaml"
k1 apply -f "$dra/v1/basic-shared-claim-across-pods.yaml"
cat >"$tmp/deployment.yaml" <<'EOF'
apiVersion: v1
kind: Namespace
metadata:
  name: kube-smoke-deployment
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  namespace: kube-smoke-deployment
  name: single-gpu
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.example.com
---
apiVersion: apps/v1
kind: Deployment
metadata:
  namespace: kube-smoke-deployment
  name: gpu-app
spec:
  replicas: 2
  selector:
    matchLabels:
      app: gpu-app
  template:
    metadata:
      labels:
        app: gpu-app
    spec:
      containers:
      - name: ctr0
        image: ubuntu:22.04
        command: ["sleep", "9999"]
        resources:
          claims:
          - name: gpu
      resourceClaims:
      - name: gpu
        resourceClaimTemplateName: single-gpu
EOF
k1 apply -f "$tmp/deployment.yaml"

# Wait for every pod (Deployment pods appear only after the controllers ran).
deadline=$(($(date +%s) + 180))
for ns in $namespaces_v1; do
  until [ "$(k1 -n "$ns" get pods -o name 2>/dev/null | wc -l)" -ge 2 ]; do
    [ "$(date +%s)" -lt "$deadline" ] || break
    sleep 0.5
  done
  k1 -n "$ns" wait --for=condition=Ready pod --all --timeout=$((deadline - $(date +%s)))s || true
done
k1 -n kube-smoke-deployment rollout status deployment/gpu-app --timeout=60s || true

k1 get resourceslices -o json >"$tmp/slices.json"
k1 get nodes -o json >"$tmp/nodes.json"
for ns in $namespaces_v1; do
  k1 -n "$ns" get pods -o json >"$tmp/pods-$ns.json"
  k1 -n "$ns" get resourceclaims -o json >"$tmp/claims-$ns.json"
done
k1 -n kube-smoke-deployment get deployment gpu-app -o json >"$tmp/deployment.json"

python3 - "$tmp" <<'EOF' || fail=1
import json, sys, os
tmp = sys.argv[1]
def load(name):
    with open(os.path.join(tmp, name)) as f:
        return json.load(f)
bad = 0
def check(ok, what):
    global bad
    print(("ok - " if ok else "not ok - ") + what)
    if not ok:
        bad = 1

fake_nodes = {n["metadata"]["name"] for n in load("nodes.json")["items"]
              if n["metadata"].get("labels", {}).get("drasync.dev/fake-node") == "true"}
check(len(fake_nodes) == 2, "2 fake nodes: %s" % sorted(fake_nodes))
published = set()
for s in load("slices.json")["items"]:
    sp = s["spec"]
    for d in sp.get("devices", []):
        published.add((sp["driver"], sp["pool"]["name"], d["name"]))
check(len(published) == 16, "16 devices published in ResourceSlices (got %d)" % len(published))

used = []
def check_ns(ns, claims_expected, pods_expected, shared):
    pods = load("pods-%s.json" % ns)["items"]
    claims = load("claims-%s.json" % ns)["items"]
    check(len(pods) == pods_expected, "%s: %d pods (got %d)" % (ns, pods_expected, len(pods)))
    check(len(claims) == claims_expected, "%s: %d claims (got %d)" % (ns, claims_expected, len(claims)))
    for p in pods:
        name = p["metadata"]["name"]
        st = p.get("status", {})
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in st.get("conditions", []))
        check(st.get("phase") == "Running" and ready, "%s/%s Running and Ready (phase %s)" % (ns, name, st.get("phase")))
        check(p["spec"].get("nodeName") in fake_nodes, "%s/%s on a fake node (%s)" % (ns, name, p["spec"].get("nodeName")))
        if not shared:
            gen = [c.get("resourceClaimName") for c in st.get("resourceClaimStatuses", [])]
            check(len(gen) == 1 and gen[0] in {c["metadata"]["name"] for c in claims},
                  "%s/%s has its generated claim %s" % (ns, name, gen))
    for c in claims:
        name = c["metadata"]["name"]
        alloc = c.get("status", {}).get("allocation")
        results = (alloc or {}).get("devices", {}).get("results", [])
        check(len(results) == 1, "%s/%s allocated one device" % (ns, name))
        for r in results:
            dev = (r["driver"], r["pool"], r["device"])
            check(dev in published, "%s/%s device %s is in a ResourceSlice" % (ns, name, "/".join(dev)))
            used.append(dev)
        reserved = {r["uid"] for r in c.get("status", {}).get("reservedFor", [])}
        owners = {p["metadata"]["uid"] for p in pods if any(
            rc.get("resourceClaimName") == name for rc in p.get("status", {}).get("resourceClaimStatuses", []))
            or any(pc.get("resourceClaimName") == name for pc in p["spec"].get("resourceClaims", []))}
        check(owners and owners <= reserved, "%s/%s reserved for its %d pod(s)" % (ns, name, len(owners)))
        if not shared:
            check(any(o.get("kind") == "Pod" for o in c["metadata"].get("ownerReferences", [])),
                  "%s/%s was generated for a pod" % (ns, name))

check_ns("basic-resourceclaimtemplate", 2, 2, False)
check_ns("basic-shared-claim-across-pods", 1, 2, True)
check_ns("kube-smoke-deployment", 2, 2, False)
check(len(used) == len(set(used)) == 5, "5 distinct devices allocated (%d)" % len(set(used)))
d = load("deployment.json")
check(d.get("status", {}).get("readyReplicas") == 2, "Deployment gpu-app has 2 ready replicas")
sys.exit(bad)
EOF

# A Job whose pods the node agent lets exit 0 (annotation) completes.
k1 apply -f - <<'EOF'
apiVersion: v1
kind: Namespace
metadata:
  name: kube-smoke-job
---
apiVersion: batch/v1
kind: Job
metadata:
  namespace: kube-smoke-job
  name: done
spec:
  template:
    metadata:
      annotations:
        drasync.dev/fake-exit-code: "0"
    spec:
      restartPolicy: Never
      containers:
      - name: ctr0
        image: ubuntu:22.04
        command: ["true"]
EOF
check "Job with drasync.dev/fake-exit-code=0 completes" \
  "$DS_KUBE_BIN" kubectl --kubeconfig "$DS_KUBECONFIG_V1" -n kube-smoke-job wait --for=condition=Complete job/done --timeout=90s

echo "# v1beta1 cluster"
kb api-versions >"$tmp/versions"
check "v1beta1 cluster serves resource.k8s.io/v1beta1" grep -qx 'resource.k8s.io/v1beta1' "$tmp/versions"
check "v1beta1 cluster does not serve resource.k8s.io/v1" bash -c "! grep -qx 'resource.k8s.io/v1' '$tmp/versions'"
check "GET /apis/resource.k8s.io/v1 is 404" bash -c \
  "'$DS_KUBE_BIN' kubectl --kubeconfig '$DS_KUBECONFIG_V1BETA1' get --raw /apis/resource.k8s.io/v1 2>&1 | grep -q NotFound"
check "v1beta1 cluster accepts gpu-test4.yaml" kb apply -f "$dra/v1beta1/gpu-test4.yaml"
check "gpu-test4 claim stored as resource.k8s.io/v1beta1" bash -c \
  "'$DS_KUBE_BIN' kubectl --kubeconfig '$DS_KUBECONFIG_V1BETA1' -n gpu-test4 get resourceclaims.v1beta1.resource.k8s.io single-gpu -o jsonpath='{.apiVersion} {.spec.devices.requests[0].deviceClassName}' | grep -qx 'resource.k8s.io/v1beta1 gpu.example.com'"
kb -n gpu-test4 wait --for=condition=Ready pod --all --timeout=120s || true
kb -n gpu-test4 get pods -o json >"$tmp/b-pods.json" || true
kb -n gpu-test4 get resourceclaims.v1beta1.resource.k8s.io single-gpu -o json >"$tmp/b-claim.json" || true
kb get resourceslices.v1beta1.resource.k8s.io -o json >"$tmp/b-slices.json" || true
python3 - "$tmp" <<'PY' || fail=1
import json, sys, os
tmp = sys.argv[1]
def load(name):
    with open(os.path.join(tmp, name)) as f:
        return json.load(f)
bad = 0
def check(ok, what):
    global bad
    print(("ok - " if ok else "not ok - ") + what)
    if not ok:
        bad = 1
pods = load("b-pods.json")["items"]
claim = load("b-claim.json")
published = {(s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"])
             for s in load("b-slices.json")["items"] for d in s["spec"].get("devices", [])}
check(len(published) == 16, "v1beta1: 16 devices published (got %d)" % len(published))
check(len(pods) == 2, "gpu-test4: 2 pods (got %d)" % len(pods))
for p in pods:
    st = p.get("status", {})
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in st.get("conditions", []))
    check(st.get("phase") == "Running" and ready, "gpu-test4/%s Running and Ready (phase %s)" % (p["metadata"]["name"], st.get("phase")))
results = (claim.get("status", {}).get("allocation") or {}).get("devices", {}).get("results", [])
check(len(results) == 1 and (results[0]["driver"], results[0]["pool"], results[0]["device"]) in published,
      "gpu-test4/single-gpu allocated one published device through v1beta1 (%s)" % results)
reserved = {r["uid"] for r in claim.get("status", {}).get("reservedFor", [])}
check(len(pods) == 2 and {p["metadata"]["uid"] for p in pods} <= reserved, "gpu-test4/single-gpu reserved for both pods")
sys.exit(bad)
PY

if [ "$fail" -ne 0 ]; then
  echo "smoke: FAILED" >&2
  exit 1
fi
echo "smoke: all checks passed"
