#!/usr/bin/env bash
# deploy/systemd/drasync-{source,target}.service as systemd itself reads them
# (ctest deploy_systemd_units):
#   - systemd-analyze verify: every directive known, the ExecStart binary
#     (the built agent, put where the unit names it) executable; any warning
#     fails;
#   - systemd-analyze security --offline: overall exposure at most 2.0
#     (systemd's "OK" band);
#   - the hardening the packaging promises is there (DynamicUser,
#     StateDirectory, ProtectSystem=strict, NoNewPrivileges, no
#     capabilities, the key as a credential) and the paths the comments tell
#     the configuration to use are the ones the unit makes;
#   - the agents accept a configuration written as the comments say (the
#     credential paths, the StateDirectory).
# Exit 77 (ctest: skipped) only when systemd-analyze is missing.
#
# Environment: DS_SOURCE_BIN, DS_TARGET_BIN.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
units=$here/../../deploy/systemd
if ! command -v systemd-analyze >/dev/null; then
  echo "systemd_units: SKIP: systemd-analyze is not installed (Debian package systemd)" >&2
  exit 77
fi
for v in DS_SOURCE_BIN DS_TARGET_BIN; do
  [ -x "${!v:-}" ] || { echo "systemd_units: $v is not an executable" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tap.sh
. "$here/tap.sh"

for agent in source target; do
  unit=drasync-$agent.service
  src=$units/$unit
  bin_var=DS_$(echo "$agent" | tr a-z A-Z)_BIN
  [ -f "$src" ] || { notok "$unit: missing"; continue; }
  # The unit as shipped, but starting the agent just built.
  sed "s|^ExecStart=/usr/local/bin/drasync-$agent |ExecStart=${!bin_var} |" "$src" >"$tmp/$unit"
  grep -q "^ExecStart=${!bin_var} run --config /etc/drasync/$agent.yaml$" "$tmp/$unit" ||
    notok "$unit: ExecStart is not /usr/local/bin/drasync-$agent run --config /etc/drasync/$agent.yaml"
  if systemd-analyze verify "$tmp/$unit" >"$tmp/verify" 2>&1 && [ ! -s "$tmp/verify" ]; then
    ok "$unit: systemd-analyze verify, no warning"
  else
    notok "$unit: systemd-analyze verify: $(cat "$tmp/verify")"
  fi
  if systemd-analyze security --offline=yes --threshold=20 "$tmp/$unit" >"$tmp/security" 2>&1; then
    ok "$unit: $(grep -o 'Overall exposure level.*' "$tmp/security" | sed 's/ [^ ]*$//')"
  else
    notok "$unit: exposure above 2.0: $(grep -E 'Overall|✗' "$tmp/security" | tr '\n' ' ')"
  fi
  for want in DynamicUser=yes StateDirectory=drasync-$agent ProtectSystem=strict NoNewPrivileges=yes \
    ProtectHome=yes PrivateTmp=yes PrivateDevices=yes CapabilityBoundingSet= \
    RestrictSUIDSGID=yes "SystemCallFilter=@system-service" \
    "LoadCredential=$agent.key:/etc/drasync/keys/$agent.key" UMask=0077 RestartPreventExitStatus=2; do
    grep -qx "$want" "$src" || notok "$unit: no $want"
  done
  grep -q "secretKeyFile: /run/credentials/$unit/$agent.key" "$src" ||
    notok "$unit: its comment does not tell secretKeyFile the credential path"
  grep -q "stateDir: /var/lib/drasync-$agent" "$src" ||
    notok "$unit: its comment does not tell stateDir the StateDirectory"
done

# A configuration as the comments tell it, read by each agent: the
# credential files are what systemd makes them (owned by the service user,
# 0400), here under a scratch directory.
cred=$tmp/run/credentials
mkdir -p "$cred/drasync-source.service" "$cred/drasync-target.service" "$tmp/state"
"$DS_SOURCE_BIN" keygen --out "$tmp/src" >/dev/null
"$DS_TARGET_BIN" keygen --out "$tmp/tgt" >/dev/null
install -m 0400 "$tmp/src/source.key" "$cred/drasync-source.service/source.key"
install -m 0400 "$tmp/tgt/target.key" "$cred/drasync-target.service/target.key"
printf 'prod-east %s\n' "$(grep -v "^#" "$tmp/src/source.pub")" >"$tmp/authorized_sources"
cat >"$tmp/source.yaml" <<YAML
apiVersion: drasync.io/v1alpha1
kind: SourceConfig
clusterName: prod-east
target: {endpoint: "tcp://dr.example.net:7450", serverPublicKey: "$(grep -v "^#" "$tmp/tgt/target.pub")"}
keys: {secretKeyFile: $cred/drasync-source.service/source.key}
kubeconfig: $cred/drasync-source.service/kubeconfig
stateDir: $tmp/state/drasync-source
namespaces: [ml-team]
schedule: {mode: watch}
YAML
"$DS_SOURCE_BIN" status --config "$tmp/source.yaml" >"$tmp/status" 2>&1 || true
if grep -q 'nothing in stateDir' "$tmp/status"; then
  ok "drasync-source reads a source.yaml written as drasync-source.service says"
else
  notok "drasync-source refuses the source.yaml drasync-source.service describes: $(cat "$tmp/status")"
fi
cat >"$tmp/target.yaml" <<YAML
apiVersion: drasync.io/v1alpha1
kind: TargetConfig
listen: tcp://0.0.0.0:7450
keys:
  secretKeyFile: $cred/drasync-target.service/target.key
  authorizedSources: $tmp/authorized_sources
kubeconfig: $cred/drasync-target.service/kubeconfig
stateDir: $tmp/state/drasync-target
mode: standby
namespaceMappings: {ml-team: ml-team-dr}
YAML
printf 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: ml-team}\n' >"$tmp/in.yaml"
if "$DS_TARGET_BIN" plan --config "$tmp/target.yaml" -f "$tmp/in.yaml" >/dev/null 2>"$tmp/plan.err"; then
  ok "drasync-target reads a target.yaml written as drasync-target.service says"
else
  notok "drasync-target refuses the target.yaml drasync-target.service describes: $(cat "$tmp/plan.err")"
fi

if [ "$fail" -ne 0 ]; then
  echo "systemd_units: FAILED" >&2
  exit 1
fi
echo "systemd_units: both units passed"
