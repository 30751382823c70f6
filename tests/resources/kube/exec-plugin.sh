#!/bin/sh
# Plays a Kubernetes exec credential plugin for the kubeconfig tests.
#   exec-plugin.sh API_VERSION MODE
# MODE: token  -> status.token = $PLUGIN_TOKEN-<run number>, expiring at $PLUGIN_EXPIRY (if set)
#       cert   -> status.clientCertificateData/clientKeyData
#       fail   -> a message on stderr, exit 3
#       wrong  -> an answer with another apiVersion
#       junk   -> not JSON
# Every run appends a line to $PLUGIN_COUNT_FILE; KUBERNETES_EXEC_INFO is saved in
# $PLUGIN_COUNT_FILE.info so the test can check what the plugin was given.
set -eu
api=$1
mode=$2
echo run >>"$PLUGIN_COUNT_FILE"
printf '%s' "${KUBERNETES_EXEC_INFO:-}" >"$PLUGIN_COUNT_FILE.info"
n=$(wc -l <"$PLUGIN_COUNT_FILE" | tr -d ' ')
case "$mode" in
token)
	if [ -n "${PLUGIN_EXPIRY:-}" ]; then
		exp=",\"expirationTimestamp\":\"$PLUGIN_EXPIRY\""
	else
		exp=""
	fi
	printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"%s-%s"%s}}\n' \
		"$api" "$PLUGIN_TOKEN" "$n" "$exp"
	;;
cert)
	printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"clientCertificateData":"CERT-PEM","clientKeyData":"KEY-PEM"}}\n' "$api"
	;;
fail)
	echo "error: not logged in; run 'corp-sso login'" >&2
	exit 3
	;;
wrong)
	printf '{"apiVersion":"client.authentication.k8s.io/v1alpha1","kind":"ExecCredential","status":{"token":"x"}}\n'
	;;
junk)
	echo "this is not json"
	;;
esac
