#!/usr/bin/env bash
# Least privilege, shown by the real API server (ctest deploy_rbac, fixture
# kube_v1). The ServiceAccounts, ClusterRoles and bindings of
# deploy/kustomize/source and deploy/kustomize/target are created on the test
# cluster as shipped; each agent's token comes from the TokenRequest API
# (kubectl create token) and goes into a kubeconfig of its own. With those
# tokens:
#   - the source writes nothing: every write tried is refused 403, and the
#     API server's own account of the token (SelfSubjectRulesReview, kubectl
#     auth can-i --list) has no verb but get/list/watch, in a selected
#     namespace and in any other. Its reads stop at its selection (a fixed
#     list, read namespace by namespace): the source's RBAC of
#     deploy/kustomize/source with an overlay selecting ml-team-2 too, as an
#     operator writes one; in other-team, Secrets (get, list), ConfigMaps
#     and the Namespace are refused 403, as are Secrets cluster-wide and the
#     list of every Namespace; its rules there name nothing but DeviceClasses
#     and the selected Namespaces;
#   - the target writes only in the namespaces it manages: in another
#     namespace, on that namespace, on a new namespace, cluster-wide, it is
#     refused 403; in a managed one it may create;
#   - the real agents run on those tokens: drasync-target run (standby) and
#     drasync-source run (once) replicate a namespace (ConfigMap, Secret,
#     Deployment, ResourceClaimTemplate) into the managed namespace, then
#     drasync-source run (watch) on the same token carries a change made
#     there, meeting no 403 on its own cluster either way; ml-team-2
#     dropped from the list is forgotten, not tombstoned; the managed
#     Namespace, made by the base, keeps its metadata (its Pod Security
#     level included): drasync writes no Namespace it did not create; a
#     second source namespace (ml-team-2), mapped in namespaceMappings to the
#     unmanaged other-team but not granted to the source by sources[], is
#     refused by the importer before the API server would refuse it (state
#     refused with a reason naming sources[0].namespaces in
#     drasync-target status, the apply log line and
#     drasync_target_refused_total, and on the source in its summary and
#     event=target_refused; no 403 for it anywhere), nothing is
#     written there and that namespace is left as it was; drill (into the
#     managed scratch namespace), failover, verify, failback and inventory
#     work on the same token, and drill --cleanup cannot delete the scratch
#     namespace; failover writes drasync.io/mode on the managed Namespace;
#   - the ledger's identity: run writes it into the ConfigMap
#     drasync/drasync-ledger on the target's token, which may read no other
#     ConfigMap there nor list them.
#
# Environment: DS_KUBECONFIG_V1, DS_KUBE_BIN, DS_SOURCE_BIN, DS_TARGET_BIN.
set -euo pipefail
for v in DS_KUBECONFIG_V1 DS_KUBE_BIN DS_SOURCE_BIN DS_TARGET_BIN; do
  [ -n "${!v:-}" ] || { echo "rbac: $v is not set" >&2; exit 1; }
done
here=$(cd "$(dirname "$0")" && pwd)
deploy=$here/../../deploy
k() { "$DS_KUBE_BIN" kubectl --kubeconfig "$DS_KUBECONFIG_V1" "$@"; }

tmp=$(mktemp -d)
namespaces="drasync ml-team ml-team-2 ml-team-dr ml-team-dr-drill other-team"
cluster_objects="clusterrolebinding/drasync-source clusterrole/drasync-source
clusterrolebinding/drasync-source-cluster clusterrole/drasync-source-cluster
clusterrolebinding/drasync-target-cluster clusterrole/drasync-target-cluster clusterrole/drasync-target"
target_pid=
watch_pid=
cleanup() {
  local ns o
  if [ -n "$watch_pid" ]; then
    kill -TERM "$watch_pid" 2>/dev/null || true
    wait "$watch_pid" 2>/dev/null || true
  fi
  if [ -n "$target_pid" ]; then
    kill -TERM "$target_pid" 2>/dev/null || true
    wait "$target_pid" 2>/dev/null || true
  fi
  for o in $cluster_objects; do k delete "$o" --ignore-not-found >/dev/null 2>&1 || true; done
  for ns in $namespaces; do k delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true; done
  for ns in $namespaces; do k wait --for=delete "namespace/$ns" --timeout=120s >/dev/null 2>&1 || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# shellcheck source=tap.sh
. "$here/tap.sh"
# denied WHO DESCRIPTION KUBECTL-ARGS...: the API server answers 403.
denied() {
  local who=$1 what=$2 out
  shift 2
  if out=$("$who" "$@" 2>&1); then
    notok "$who may $what (it should not): $out"
  elif grep -qi 'forbidden' <<<"$out"; then
    ok "$who: $what: 403 Forbidden"
  else
    notok "$who: $what failed, but not with 403: $out"
  fi
}
allowed() {
  local who=$1 what=$2 out
  shift 2
  if out=$("$who" "$@" 2>&1); then
    ok "$who may $what"
  else
    notok "$who may not $what: $out"
  fi
}

for ns in $namespaces; do k wait --for=delete "namespace/$ns" --timeout=120s >/dev/null 2>&1 || true; done

# The source's world (its RoleBindings live in its namespaces): ml-team
# (mapped to the managed ml-team-dr) and ml-team-2 (mapped to other-team,
# which the target neither grants the source nor manages, and which holds
# something of its own).
for ns in ml-team ml-team-2 other-team; do k create namespace "$ns" >/dev/null; done

# ---- the shipped RBAC, as the bases render it ------------------------------
# Only what makes the agents' identities (the Deployments need a kubelet
# and an image registry this cluster has not). The source selects ml-team
# and ml-team-2: an overlay of the base adds ml-team-2 as its comments say.
cp -r "$deploy/kustomize/source" "$tmp/source-base"
mkdir -p "$tmp/source-overlay"
cat >"$tmp/source-overlay/kustomization.yaml" <<'YAML'
resources: [../source-base, rolebinding.yaml]
patches:
- target: {group: rbac.authorization.k8s.io, kind: ClusterRole, name: drasync-source-cluster}
  patch: |-
    - {op: test, path: /rules/0/resources, value: [namespaces]}
    - {op: add, path: /rules/0/resourceNames/-, value: ml-team-2}
YAML
sed 's/namespace: ml-team$/namespace: ml-team-2/' "$deploy/kustomize/source/selected-namespaces.yaml" >"$tmp/source-overlay/rolebinding.yaml"
for agent in source target; do
  dir=$deploy/kustomize/$agent
  [ "$agent" != source ] || dir=$tmp/source-overlay
  k kustomize "$dir" >"$tmp/$agent.yaml"
  k create --dry-run=client -o json -f "$tmp/$agent.yaml" >"$tmp/$agent.json"
  python3 - "$tmp/$agent.json" "$tmp/$agent-rbac.json" <<'PY'
import json, sys
keep = {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
# kubectl create -o json prints one object after another (or a List).
text, dec, objs, i = open(sys.argv[1]).read(), json.JSONDecoder(), [], 0
while True:
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        break
    o, i = dec.raw_decode(text, i)
    objs += o["items"] if o.get("kind") == "List" else [o]
# Namespaces first, so that what lives in them can be created.
items = sorted((o for o in objs if o["kind"] in keep), key=lambda o: o["kind"] != "Namespace")
json.dump({"apiVersion": "v1", "kind": "List", "items": items}, open(sys.argv[2], "w"))
PY
  k apply -f "$tmp/$agent-rbac.json" >/dev/null
done
ok "created the ServiceAccounts and RBAC of deploy/kustomize/source and deploy/kustomize/target"

k apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: ml-team}
data: {mode: fast}
---
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: ml-team}
stringData: {token: s3cret}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: gpu, namespace: ml-team}
spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ml-team}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: registry.k8s.io/pause:3.10}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings2, namespace: ml-team-2}
data: {mode: slow}
---
apiVersion: v1
kind: Secret
metadata: {name: private, namespace: other-team}
stringData: {password: not-for-drasync}
YAML

# ---- tokens (TokenRequest) and a kubeconfig per agent -----------------------
server=$(k config view --raw --minify -o jsonpath='{.clusters[0].cluster.server}')
ca=$(k config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
# "default": a ServiceAccount bound to nothing, the baseline (made by the
# ServiceAccount controller once the namespace exists).
for _ in $(seq 1 100); do k -n drasync get serviceaccount default >/dev/null 2>&1 && break; sleep 0.2; done
for agent in source target default; do
  sa=drasync-$agent
  [ "$agent" != default ] || sa=default
  token=$(k -n drasync create token "$sa" --duration=1h)
  cat >"$tmp/$agent.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: "$server", certificate-authority-data: "$ca"}
users:
- name: drasync-$agent
  user: {token: "$token"}
contexts:
- name: drasync-$agent
  context: {cluster: test, user: drasync-$agent}
current-context: drasync-$agent
KC
  chmod 600 "$tmp/$agent.kubeconfig"
done
source_k() { "$DS_KUBE_BIN" kubectl --kubeconfig "$tmp/source.kubeconfig" "$@"; }
target_k() { "$DS_KUBE_BIN" kubectl --kubeconfig "$tmp/target.kubeconfig" "$@"; }
bare_k() { "$DS_KUBE_BIN" kubectl --kubeconfig "$tmp/default.kubeconfig" "$@"; }
for agent in source target; do
  who=$("$DS_KUBE_BIN" kubectl --kubeconfig "$tmp/$agent.kubeconfig" auth whoami -o jsonpath='{.status.userInfo.username}' 2>&1 || true)
  if [ "$who" = "system:serviceaccount:drasync:drasync-$agent" ]; then
    ok "the $agent's token authenticates as $who"
  else
    notok "the $agent's token is not system:serviceaccount:drasync:drasync-$agent: $who"
  fi
done

# only_reads WHO NS: the API server's rules for the token in NS
# (SelfSubjectRulesReview) grant no verb but get/list/watch, apart from the
# self-reviews every authenticated user may create. ALLOW (optional): extra
# "resource verbs" lines permitted.
rules_beyond_reads() {
  "$1" auth can-i --list -n "$2" --no-headers 2>/dev/null | python3 -c '
import re, sys
selfreviews = {"selfsubjectreviews.authentication.k8s.io", "selfsubjectaccessreviews.authorization.k8s.io",
               "selfsubjectrulesreviews.authorization.k8s.io"}
# ALLOW: "resource|name,name|verb,verb": that resource, those names only,
# those verbs only.
allow = [a.split("|") for a in sys.argv[1:]]
for line in sys.stdin:
    m = re.match(r"^(\S+)\s+(.*)$", line.rstrip())
    groups = re.findall(r"\[([^\]]*)\]", m.group(2)) if m else []
    if len(groups) != 3:
        continue
    res, names, verbs = m.group(1), set(groups[1].split()), set(groups[2].split())
    if res in selfreviews or res.startswith("/"):
        continue
    if not verbs - {"get", "list", "watch"}:
        continue
    if any(res == r and names and names <= set(n.split(",")) and verbs <= set(v.split(","))
           for r, n, v in allow):
        continue
    print(line.strip())
' "${@:3}"
}

echo "# drasync-source: reads only"
for ns in ml-team other-team; do
  beyond=$(rules_beyond_reads source_k "$ns")
  rules=$(source_k auth can-i --list -n "$ns" --no-headers 2>/dev/null | wc -l)
  if [ "$rules" -gt 3 ] && [ -z "$beyond" ]; then
    ok "source in $ns: the API server lists $rules rules, none with a verb beyond get/list/watch"
  else
    notok "source in $ns: rules beyond reads ($rules rules): $beyond"
  fi
done
denied source_k "create a ConfigMap in the selected ml-team" -n ml-team create configmap x --from-literal=a=b
denied source_k "update a ConfigMap in ml-team" -n ml-team label configmap settings touched=yes
denied source_k "delete a ConfigMap in ml-team" -n ml-team delete configmap settings
denied source_k "delete a Pod in ml-team" -n ml-team delete pods --all
denied source_k "scale a Deployment in ml-team" -n ml-team scale deployment web --replicas=0
denied source_k "label the Namespace ml-team" label namespace ml-team touched=yes
denied source_k "create a Namespace" create namespace drasync-made-this
denied source_k "create a DeviceClass" create -f - <<<'{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"x.example.com"}}'
denied source_k "create a ClusterRoleBinding (escalate)" create clusterrolebinding x --clusterrole=cluster-admin --serviceaccount=drasync:drasync-source
denied source_k "request a token for a ServiceAccount" -n ml-team create token default
denied source_k "read ClusterRoles" get clusterroles
denied source_k "read Nodes" get nodes
allowed source_k "read the ConfigMap it replicates" -n ml-team get configmap settings
allowed source_k "list Secrets of the selected ml-team" -n ml-team get secrets
allowed source_k "read a Secret of the selected ml-team-2 (overlay)" -n ml-team-2 get secrets
allowed source_k "read the selected Namespace ml-team" get namespace ml-team
allowed source_k "list the Namespace ml-team by name (field selector)" get namespaces --field-selector metadata.name=ml-team
allowed source_k "watch the Namespace ml-team-2 by name (field selector)" get --raw '/api/v1/namespaces?fieldSelector=metadata.name%3Dml-team-2&watch=1&timeoutSeconds=1'
allowed source_k "list ConfigMaps of ml-team-2" -n ml-team-2 get configmaps
# Nothing outside the selection: the reads are namespace by namespace.
denied source_k "read the Secret of the unselected other-team" -n other-team get secret private
denied source_k "list Secrets of other-team" -n other-team get secrets
denied source_k "watch Secrets of other-team" get --raw '/api/v1/namespaces/other-team/secrets?watch=1&timeoutSeconds=1'
denied source_k "list Secrets cluster-wide" get secrets -A
denied source_k "list ConfigMaps of other-team" -n other-team get configmaps
denied source_k "list Pods cluster-wide" get pods -A
denied source_k "read the unselected Namespace other-team" get namespace other-team
denied source_k "list every Namespace" get namespaces

bare_k auth can-i --list -n other-team --no-headers 2>/dev/null | tr -s ' ' | sort >"$tmp/bare.rules"
others=$(source_k auth can-i --list -n other-team --no-headers 2>/dev/null | tr -s ' ' | sort |
  comm -23 - "$tmp/bare.rules" | awk '{print $1}' |
  grep -v -e '^deviceclasses.resource.k8s.io$' -e '^namespaces$' | sort -u | tr '\n' ' ' || true)
# the Namespace rules, one line per name or per group of names: their names
# together, and their verbs, must be the selected ones and reads
ns_names=$(source_k auth can-i --list -n other-team --no-headers 2>/dev/null | awk '$1 == "namespaces"' | python3 -c '
import re, sys
names, verbs = set(), set()
for line in sys.stdin:
    g = re.findall(r"\[([^\]]*)\]", line)
    if len(g) != 3 or not g[1].strip():
        print("unnamed:", line.strip())
        continue
    names |= set(g[1].split())
    verbs |= set(g[2].split())
print(" ".join(sorted(names)), "|", " ".join(sorted(verbs)))
')
if [ "$(wc -l <"$tmp/bare.rules")" -gt 0 ] && [ -z "$others" ] && [ "$ns_names" = "ml-team ml-team-2 | get list watch" ]; then
  ok "source in other-team: beyond any ServiceAccount's rules, the API server lists none but DeviceClasses and the selected Namespaces by name ($ns_names)"
else
  notok "source in other-team: rules for '$others', namespaces: '$ns_names'"
fi

echo "# drasync-target: writes only where it manages"
denied target_k "create a ConfigMap in the unmanaged other-team" -n other-team create configmap x --from-literal=a=b
denied target_k "read a Secret of other-team" -n other-team get secret private
denied target_k "list Secrets cluster-wide" get secrets -A
denied target_k "list Pods cluster-wide" get pods -A
denied target_k "create a ConfigMap in the source namespace ml-team" -n ml-team create configmap x --from-literal=a=b
denied target_k "delete a ConfigMap of ml-team" -n ml-team delete configmap settings
denied target_k "label the unmanaged Namespace other-team" label namespace other-team touched=yes
denied target_k "read the unmanaged Namespace other-team" get namespace other-team
denied target_k "delete the managed Namespace ml-team-dr" delete namespace ml-team-dr --wait=false
denied target_k "create a Namespace" create namespace drasync-made-this
denied target_k "list Namespaces" get namespaces
denied target_k "create a DeviceClass" create -f - <<<'{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"x.example.com"}}'
denied target_k "delete a DeviceClass" delete deviceclass gpu.example.com
denied target_k "create a ClusterRoleBinding (escalate)" create clusterrolebinding x --clusterrole=cluster-admin --serviceaccount=drasync:drasync-target
denied target_k "create a RoleBinding in its managed namespace (escalate)" -n ml-team-dr create rolebinding x --clusterrole=admin --serviceaccount=drasync:drasync-target
beyond=$(rules_beyond_reads target_k other-team "namespaces|ml-team-dr,ml-team-dr-drill|get,patch,update")
if [ -z "$beyond" ]; then
  ok "target in other-team: the API server lists no write beyond the managed Namespaces by name"
else
  notok "target in other-team: writes beyond the managed namespaces: $beyond"
fi
# Nor any read there: in other-team the target's rules, beside what every
# authenticated ServiceAccount has (drasync's "default", bound to nothing),
# name nothing but the cluster-wide DeviceClasses and the managed Namespaces.
# (columns are padded to the widest entry: compared with single spaces)
others=$(target_k auth can-i --list -n other-team --no-headers 2>/dev/null | tr -s ' ' | sort |
  comm -23 - "$tmp/bare.rules" | awk '{print $1}' |
  grep -v -e '^deviceclasses.resource.k8s.io$' -e '^namespaces$' | sort -u | tr '\n' ' ' || true)
if [ "$(wc -l <"$tmp/bare.rules")" -gt 0 ] && [ -z "$others" ]; then
  ok "target in other-team: beyond any ServiceAccount's rules, the API server lists none but DeviceClasses and the managed Namespaces"
else
  notok "target in other-team: rules for $others"
fi
allowed target_k "create a ConfigMap in the managed ml-team-dr" -n ml-team-dr create configmap rbac-probe --from-literal=a=b
allowed target_k "delete it again" -n ml-team-dr delete configmap rbac-probe
allowed target_k "read the managed Namespace ml-team-dr" get namespace ml-team-dr
allowed target_k "list DeviceClasses" get deviceclasses

echo "# the agents, on these tokens"
"$DS_TARGET_BIN" keygen --out "$tmp/keys" >/dev/null
"$DS_SOURCE_BIN" keygen --out "$tmp/keys" >/dev/null
grep -v '^#' "$tmp/keys/source.pub" | sed 's/^/prod-east /' >"$tmp/authorized_sources"
metrics_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# ml-team-2 is mapped (a mapping alone grants nothing once sources is set),
# the source is granted ml-team only, as the kustomize base grants it.
cat >"$tmp/target-run.yaml" <<YAML
apiVersion: drasync.io/v1alpha1
kind: TargetConfig
listen: "tcp://127.0.0.1:*"
keys: {secretKeyFile: $tmp/keys/target.key, authorizedSources: $tmp/authorized_sources}
kubeconfig: $tmp/target.kubeconfig
stateDir: $tmp/target-state
mode: standby
namespaceMappings: {ml-team: ml-team-dr, ml-team-2: other-team}
sources:
- {name: prod-east, namespaces: [ml-team], podSecurity: baseline}
metrics: {listen: "127.0.0.1:$metrics_port"}
YAML
"$DS_TARGET_BIN" run --config "$tmp/target-run.yaml" >"$tmp/target.log" 2>&1 &
target_pid=$!
endpoint=
for _ in $(seq 1 300); do
  endpoint=$(sed -n 's/.*event=started listen=\([^ ]*\).*/\1/p' "$tmp/target.log" | head -n1)
  [ -n "$endpoint" ] && break
  kill -0 "$target_pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$endpoint" ]; then
  notok "drasync-target run did not start on its token: $(cat "$tmp/target.log")"
  exit 1
fi
ok "drasync-target run started on its token, listening on $endpoint"
# The ledger's identity, written on the target's own token into the one
# ConfigMap its Role names; no other ConfigMap of its namespace is its to read.
for _ in $(seq 1 50); do
  [ -n "$(k -n drasync get configmap drasync-ledger -o jsonpath='{.data.ledgerId}' 2>/dev/null)" ] && break
  sleep 0.1
done
ledger_id=$(k -n drasync get configmap drasync-ledger -o jsonpath='{.data.ledgerId}' 2>/dev/null || true)
if [ "${#ledger_id}" = 32 ] && grep 'event=ledger_identity ' "$tmp/target.log" | grep -q "verdict=first .*id=$ledger_id"; then
  ok "the ledger's identity $ledger_id is in the ConfigMap drasync/drasync-ledger, written on the target's token"
else
  notok "no ledger identity in drasync/drasync-ledger ('$ledger_id'): $(grep ledger_identity "$tmp/target.log" | tail -n 3)"
fi
allowed target_k "read the ConfigMap drasync/drasync-ledger" -n drasync get configmap drasync-ledger
denied target_k "read another ConfigMap of its namespace" -n drasync get configmap drasync-other
denied target_k "list the ConfigMaps of its namespace" -n drasync get configmaps
cat >"$tmp/source-run.yaml" <<YAML
apiVersion: drasync.io/v1alpha1
kind: SourceConfig
clusterName: prod-east
target: {endpoint: "$endpoint", serverPublicKey: "$(grep -v '^#' "$tmp/keys/target.pub")"}
keys: {secretKeyFile: $tmp/keys/source.key}
kubeconfig: $tmp/source.kubeconfig
stateDir: $tmp/source-state
namespaces: [ml-team, ml-team-2]
schedule: {mode: once}
YAML
"$DS_SOURCE_BIN" run --config "$tmp/source-run.yaml" --timeout 120s >"$tmp/source.out" 2>"$tmp/source.err" || true
line=$(grep -o 'acknowledged by the target: .*' "$tmp/source.out" || true)
read -r applied failed refused < <(sed -n 's/acknowledged by the target: \([0-9]*\) applied, [0-9]* held, [0-9]* waiting, \([0-9]*\) failed, \([0-9]*\) refused.*/\1 \2 \3/p' <<<"$line") || true
if [ -n "${applied:-}" ] && [ "$applied" -ge 5 ] && [ "$failed" -eq 0 ] && [ "$refused" -ge 2 ]; then
  ok "drasync-source run (once) on its token: $line"
else
  notok "drasync-source run (once): expected at least 5 applied, none failed, 2 refused: $(cat "$tmp/source.out" "$tmp/source.err" | tail -n 20)"
fi
# ml-team-2's records are refused by the importer (RESULT_REFUSED in the
# Ack, with the reason), not failed by the API server: the source hears of
# no 403.
if grep -qx 'refused ConfigMap ml-team-2/settings2: namespace ml-team-2 is not granted to source prod-east (sources\[0\].namespaces)' "$tmp/source.out" &&
  grep 'event=target_refused' "$tmp/source.err" | grep -q 'settings2'; then
  ok "the source heard settings2 refused, and why (its summary, event=target_refused)"
else
  notok "the source did not hear settings2 refused: $(grep -i refused "$tmp/source.out" "$tmp/source.err" | head -n 5)"
fi
if grep 'event=target_failed' "$tmp/source.err" | grep -qi 'forbidden'; then
  notok "the source heard of a 403 from the target: $(grep 'event=target_failed' "$tmp/source.err" | grep -i forbidden | head -n 3)"
else
  ok "the source heard of no 403 from the target"
fi
# (event=target_failed lines carry the target's results, the 403s above.)
# A 403 reads "403 Forbidden: ... is forbidden: ..."; a bare 403 would also
# match timestamps (21:50:01.403Z) and counts.
if grep -v 'event=target_failed' "$tmp/source.err" | grep -qi 'forbidden'; then
  notok "the source met a 403 on its own cluster: $(grep -v 'event=target_failed' "$tmp/source.err" | grep -i 'forbidden' | head -n 3)"
else
  ok "the source met no 403 listing and watching its cluster"
fi

# wait_get NS KIND NAME: the object appears (admin's view).
wait_get() {
  local i
  for i in $(seq 1 100); do
    k -n "$1" get "$2" "$3" -o json 2>/dev/null && return 0
    sleep 0.3
  done
  return 1
}
for obj in configmap/settings secret/creds deployment/web resourceclaimtemplate.resource.k8s.io/gpu; do
  if json=$(wait_get ml-team-dr "${obj%%/*}" "${obj#*/}") &&
    [ "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"].get("annotations",{}).get("drasync.io/source-cluster",""))' <<<"$json")" = prod-east ]; then
    ok "the target applied $obj into the managed ml-team-dr"
  else
    notok "$obj is not in ml-team-dr (annotated drasync.io/source-cluster=prod-east): $(tail -n 20 "$tmp/target.log")"
  fi
done
# Watch mode on the same token: per selected namespace one watch per kind
# and one on its Namespace by name. A change made after it started arrives.
sed 's/mode: once/mode: watch/' "$tmp/source-run.yaml" >"$tmp/source-watch.yaml"
"$DS_SOURCE_BIN" run --config "$tmp/source-watch.yaml" >"$tmp/watch.out" 2>"$tmp/watch.err" &
watch_pid=$!
for _ in $(seq 1 100); do
  grep -q 'event=pass_finished' "$tmp/watch.err" && break
  sleep 0.2
done
k -n ml-team create configmap live --from-literal=at=watch >/dev/null
k label namespace ml-team-2 drasync-test=watched >/dev/null
if wait_get ml-team-dr configmap live >/dev/null; then
  ok "drasync-source run (watch) on its token carried a ConfigMap created in ml-team while it ran"
else
  notok "the ConfigMap live did not reach ml-team-dr: $(tail -n 20 "$tmp/watch.err")"
fi
kill -TERM "$watch_pid" 2>/dev/null || true
wait "$watch_pid" 2>/dev/null || true
watch_pid=
if grep -q 'event=namespace_reads scope=namespaced namespaces=2' "$tmp/watch.err"; then
  ok "the source read namespace by namespace ($(grep -o 'event=namespace_reads.*' "$tmp/watch.err" | head -n1))"
else
  notok "the source did not say it reads namespace by namespace: $(grep -m1 'namespace_reads' "$tmp/watch.err")"
fi
if grep -v 'event=target_failed' "$tmp/watch.err" | grep -qi 'forbidden\|watch_failed\|list_failed'; then
  notok "the source (watch) met an error on its own cluster: $(grep -v 'event=target_failed' "$tmp/watch.err" | grep -i 'forbidden\|watch_failed\|list_failed' | head -n 3)"
else
  ok "the source (watch) met no 403 listing and watching its cluster"
fi

# ml-team-2 dropped from the list: the source may no longer read it, so it
# cannot tell whether it still exists (403); it forgets it (nothing is
# deleted on the target) and the pass goes on.
# (and from the RBAC, as the operator does: its RoleBinding and its name)
k -n ml-team-2 delete rolebinding drasync-source >/dev/null
k patch clusterrole drasync-source-cluster --type=json \
  -p '[{"op":"test","path":"/rules/0/resourceNames","value":["ml-team","ml-team-2"]},{"op":"remove","path":"/rules/0/resourceNames/1"}]' >/dev/null
for _ in $(seq 1 50); do source_k get namespace ml-team-2 >/dev/null 2>&1 || break; sleep 0.2; done
denied source_k "read the Namespace ml-team-2 once dropped" get namespace ml-team-2
sed 's/namespaces: \[ml-team, ml-team-2\]/namespaces: [ml-team]/' "$tmp/source-run.yaml" >"$tmp/source-one.yaml"
"$DS_SOURCE_BIN" run --config "$tmp/source-one.yaml" --timeout 120s >"$tmp/one.out" 2>"$tmp/one.err" || true
if grep -q 'event=namespace_unselected namespace=ml-team-2' "$tmp/one.err" &&
  grep -q 'acknowledged by the target' "$tmp/one.out" &&
  grep 'event=pass_finished' "$tmp/one.err" | grep -q 'tombstoned=0 rc=0'; then
  ok "ml-team-2 dropped from the list: forgotten, nothing tombstoned, the pass ends well ($(grep -o 'event=namespace_unselected.*' "$tmp/one.err" | head -n1))"
else
  notok "ml-team-2 dropped from the list: $(grep -e namespace_unselected -e pass_finished -e error "$tmp/one.err" | tail -n 5) $(tail -n 3 "$tmp/one.out")"
fi

# The managed Namespace was made by the base (the agent may not create
# one): drasync keeps its metadata, Pod Security level included, and writes
# objects into it.
managers=$(k get namespace ml-team-dr -o jsonpath='{.metadata.managedFields[*].manager}')
level=$(k get namespace ml-team-dr -o jsonpath='{.metadata.labels.pod-security\.kubernetes\.io/enforce}')
if ! grep -qw drasync <<<"$managers" && [ "$level" = baseline ] &&
  grep 'event=apply ' "$tmp/target.log" | grep 'state=applied' |
  grep -q 'Namespace ml-team-dr exists on the target and was not created by drasync'; then
  ok "the Namespace ml-team-dr, made by the base, keeps its metadata (enforce=$level, managers: $managers); drasync wrote objects into it"
else
  notok "the Namespace ml-team-dr: managers '$managers', enforce '$level', log: $(grep 'event=apply ' "$tmp/target.log" | grep 'Namespace' | head -n 3)"
fi

# ml-team-2 -> other-team: mapped, not granted. The importer refuses its
# records before any API call (the target's token would meet 403 there, as
# shown above): state refused, the reason naming sources[0].namespaces.
"$DS_TARGET_BIN" status --config "$tmp/target-run.yaml" -o json >"$tmp/status.json" 2>"$tmp/status.err" || true
refused=$(python3 - "$tmp/status.json" <<'PY'
import json, sys
st = json.load(open(sys.argv[1]))
# Reported under the source's names, per source.
for it in st.get("refused", {}).get("prod-east", []):
    if it["reason"] == "namespace ml-team-2 is not granted to source prod-east (sources[0].namespaces)":
        print(f'{it["kind"]} {it["namespace"]}/{it["name"]}')
PY
)
if grep -q '^ConfigMap ml-team-2/settings2$' <<<"$refused" && grep -q '^Namespace /ml-team-2$' <<<"$refused"; then
  ok "the importer refused ml-team-2's records, not granted by sources[0].namespaces: $(echo $refused | tr '\n' ',')"
else
  notok "drasync-target status does not show ml-team-2's objects refused for sources[0].namespaces: $(cat "$tmp/status.json" "$tmp/status.err")"
fi
forbidden=$(python3 - "$tmp/status.json" <<'PY'
import json, sys
st = json.load(open(sys.argv[1]))
for it in st.get("needsLook", []):
    if "403" in it["reason"] or "orbidden" in it["reason"]:
        print(f'{it["state"]} {it["kind"]} {it["namespace"]}/{it["name"]}: {it["reason"]}')
PY
)
if [ -z "$forbidden" ] && ! grep -i 'forbidden' "$tmp/target.log" | grep -q -e 'other-team' -e 'ml-team-2'; then
  ok "no 403 for ml-team-2 or other-team in drasync-target status or its log: the API server was never asked"
else
  notok "the API server was asked for the ungranted namespace: $forbidden $(grep -i 'forbidden' "$tmp/target.log" | head -n 3)"
fi
if grep 'event=apply ' "$tmp/target.log" | grep 'state=refused' | grep 'settings2' |
  grep -q 'reason="namespace ml-team-2 is not granted to source prod-east (sources\[0\].namespaces)"'; then
  ok "the apply log line says settings2 was refused, and why"
else
  notok "no apply log line with state=refused for settings2: $(grep 'state=refused' "$tmp/target.log" | head -n 3)"
fi
metric=$(curl -sf "http://127.0.0.1:$metrics_port/metrics" |
  sed -n 's/^drasync_target_refused_total{source="prod-east",reason="namespace"} \([0-9]*\).*/\1/p' || true)
if [ -n "$metric" ] && [ "$metric" -ge 2 ]; then
  ok "drasync_target_refused_total{source=\"prod-east\",reason=\"namespace\"} is $metric"
else
  notok "drasync_target_refused_total{source=\"prod-east\",reason=\"namespace\"} is '${metric}', not at least 2: $(curl -s "http://127.0.0.1:$metrics_port/metrics" | grep refused)"
fi
if k -n other-team get configmap settings2 >/dev/null 2>&1; then
  notok "settings2 reached the unmanaged other-team"
else
  ok "the unmanaged other-team holds nothing drasync sent"
fi
if [ "$(k get namespace other-team -o jsonpath='{.metadata.managedFields[*].manager}' | grep -cw drasync)" -eq 0 ]; then
  ok "the unmanaged Namespace other-team was not modified"
else
  notok "drasync modified the unmanaged Namespace other-team"
fi

# The DR commands on the same token, with run still running: a drill into the
# managed scratch namespace, failover, verify, failback, inventory.
replicas() { k -n "$1" get deployment web -o jsonpath='{.spec.replicas}' 2>/dev/null; }
if [ "$(replicas ml-team-dr)" = 0 ]; then
  ok "standby: web is in ml-team-dr with replicas 0"
else
  notok "standby: web has replicas '$(replicas ml-team-dr)' in ml-team-dr, not 0"
fi
# target_cmd DESCRIPTION ARGS...: a drasync-target command on the target's token exits 0.
target_cmd() {
  local what=$1
  shift
  if "$DS_TARGET_BIN" "$@" --config "$tmp/target-run.yaml" >"$tmp/cmd.out" 2>&1; then
    ok "drasync-target $what on its token"
  else
    notok "drasync-target $what on its token failed: $(tail -n 15 "$tmp/cmd.out")"
  fi
}
target_cmd "drill into the managed ml-team-dr-drill" drill --namespace ml-team-dr --timeout 120s
if [ "$(replicas ml-team-dr-drill)" = 1 ] && [ "$(replicas ml-team-dr)" = 0 ]; then
  ok "the drill's copy runs in ml-team-dr-drill (replicas 1), the standby untouched"
else
  notok "after the drill: replicas '$(replicas ml-team-dr-drill)' in the drill, '$(replicas ml-team-dr)' in the standby"
fi
target_cmd "failover" failover --namespace ml-team-dr
mode=$(k get namespace ml-team-dr -o jsonpath='{.metadata.annotations.drasync\.io/mode}')
if [ "$mode" = active ]; then
  ok "failover wrote drasync.io/mode=active on the Namespace ml-team-dr (patch, on its token)"
else
  notok "failover: the Namespace ml-team-dr has drasync.io/mode '$mode'"
fi
if [ "$(replicas ml-team-dr)" = 1 ]; then
  ok "failover activated web in ml-team-dr (replicas 1)"
else
  notok "failover: web has replicas '$(replicas ml-team-dr)'"
fi
target_cmd "verify" verify --namespace ml-team-dr
target_cmd "failback" failback --namespace ml-team-dr
if [ "$(replicas ml-team-dr)" = 0 ]; then
  ok "failback returned web to replicas 0"
else
  notok "failback: web has replicas '$(replicas ml-team-dr)'"
fi
target_cmd "inventory" inventory
# --cleanup would delete the scratch namespace: the target may not.
"$DS_TARGET_BIN" drill --namespace ml-team-dr --timeout 120s --cleanup --config "$tmp/target-run.yaml" >"$tmp/cleanup.out" 2>&1 || true
if k get namespace ml-team-dr-drill >/dev/null 2>&1 && grep -qi 'forbidden' "$tmp/cleanup.out"; then
  ok "drill --cleanup: deleting the scratch namespace is refused (403), as the README says"
else
  notok "drill --cleanup on the target's token: $(tail -n 10 "$tmp/cleanup.out")"
fi

if [ "$fail" -ne 0 ]; then
  echo "rbac: FAILED" >&2
  exit 1
fi
echo "rbac: the shipped RBAC grants what the agents need and nothing this test tried beyond it"
