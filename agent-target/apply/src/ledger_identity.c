/*
 * The ledger's identity in the ledger and in the cluster, and the namespace
 * modes on the Namespaces (ledger_identity.h).
 */
#include "drasync/ledger_identity.h"

#include "drasync/k8s_object.h"
#include "drasync/schemas.h"
#include "drasync/source_grants.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *const verdict_names[DS_IDENTITY_VERDICT_MAX] = {
    [DS_IDENTITY_SAME] = "same", [DS_IDENTITY_FIRST] = "first", [DS_IDENTITY_PUBLISH] = "publish",
    [DS_IDENTITY_LOST] = "lost", [DS_IDENTITY_OTHER] = "other", [DS_IDENTITY_ADOPT] = "adopt",
};

const char *ds_identity_verdict_name(enum ds_identity_verdict v)
{
	/* _MAX: no decision (the ConfigMap could not be read) */
	return (int)v >= 0 && v < DS_IDENTITY_VERDICT_MAX ? verdict_names[v] : "none";
}

enum ds_identity_verdict ds_ledger_identity_decide(const char *ledger_id, const char *cluster_id,
						   bool new_ledger)
{
	bool l = ledger_id && ledger_id[0], c = cluster_id && cluster_id[0];

	if (new_ledger)
		return DS_IDENTITY_ADOPT;
	if (!l && !c)
		return DS_IDENTITY_FIRST;
	if (!c)
		return DS_IDENTITY_PUBLISH;
	if (!l)
		return DS_IDENTITY_LOST;
	return strcmp(ledger_id, cluster_id) == 0 ? DS_IDENTITY_SAME : DS_IDENTITY_OTHER;
}

static void rfc3339(int64_t t, char *buf, size_t size)
{
	time_t tt = (time_t)t;
	struct tm tm;

	gmtime_r(&tt, &tm);
	strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int ds_ledger_identity_read(const char *ledger_path, ds_ledger_identity *out, ds_err *err)
{
	ds_ledger_identity id;
	ds_store *st = NULL;
	struct stat sb;
	int rc;

	/* Nothing to read, and opening would make the file. */
	if (stat(ledger_path, &sb) < 0 || sb.st_size == 0) {
		memset(out, 0, sizeof(*out));
		return 0;
	}
	rc = ds_ledger_open(&st, ledger_path, DS_STORE_READONLY, err);
	if (rc < 0)
		return rc;
	memset(&id, 0, sizeof(id));
	ds_store_info_get(st, DS_LEDGER_INFO_ID, id.id, sizeof(id.id));
	ds_store_info_get(st, DS_LEDGER_INFO_CREATED, id.created, sizeof(id.created));
	ds_store_free(st);
	*out = id;
	return id.id[0] ? 1 : 0;
}

int ds_ledger_identity_ensure(const char *ledger_path, ds_ledger_identity *out, ds_err *err)
{
	ds_ledger_identity id;
	unsigned char raw[16];
	ds_store *st = NULL;
	int rc;

	rc = ds_ledger_open(&st, ledger_path, 0, err);
	if (rc < 0)
		return rc;
	/* Immediate: two commands starting at once make one identity, not two. */
	rc = ds_store_begin(st, true, err);
	if (rc < 0)
		goto out;
	memset(&id, 0, sizeof(id));
	if (ds_store_info_get(st, DS_LEDGER_INFO_ID, id.id, sizeof(id.id)) == 1) {
		ds_store_info_get(st, DS_LEDGER_INFO_CREATED, id.created, sizeof(id.created));
		ds_store_rollback(st);
		*out = id;
		rc = 0;
		goto out;
	}
	if (RAND_bytes(raw, (int)sizeof(raw)) != 1) {
		ds_store_rollback(st);
		ds_err_set(err, "ledger identity: the random number generator failed");
		rc = -EIO;
		goto out;
	}
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(id.id + 2 * i, 3, "%02x", raw[i]);
	rfc3339((int64_t)time(NULL), id.created, sizeof(id.created));
	rc = ds_store_info_set(st, DS_LEDGER_INFO_ID, id.id, err);
	if (rc == 0)
		rc = ds_store_info_set(st, DS_LEDGER_INFO_CREATED, id.created, err);
	if (rc == 0)
		rc = ds_store_commit(st, err);
	if (rc < 0) {
		ds_store_rollback(st);
		goto out;
	}
	*out = id;
	rc = 1;
out:
	ds_store_free(st);
	return rc;
}

const char *ds_ledger_identity_namespace(const ds_target_config *cfg, char *buf, size_t size)
{
	const char *ns = cfg ? ds_target_config_identity_namespace(cfg) : NULL;
	FILE *f;

	if (ns) {
		snprintf(buf, size, "%s", ns);
		return buf;
	}
	snprintf(buf, size, "%s", DS_LEDGER_DEFAULT_NAMESPACE);
	f = fopen(DS_LEDGER_SA_NAMESPACE_FILE, "r");
	if (f) {
		char line[256];

		if (fgets(line, sizeof(line), f)) {
			line[strcspn(line, " \t\r\n")] = '\0';
			if (line[0])
				snprintf(buf, size, "%s", line);
		}
		fclose(f);
	}
	return buf;
}

static const struct ds_kube_resource configmaps = {.group = "",
						   .version = "v1",
						   .resource = "configmaps",
						   .kind = "ConfigMap",
						   .namespaced = true};
static const struct ds_kube_resource namespaces = {
    .group = "", .version = "v1", .resource = "namespaces", .kind = "Namespace"};

int ds_ledger_identity_fetch(ds_kube *k, const char *ns, ds_ledger_identity *out, ds_kube_error *ke)
{
	ds_ledger_identity id;
	json_t *cm = NULL, *data;
	int rc = ds_kube_get(k, &configmaps, ns, DS_LEDGER_CONFIGMAP, NULL, &cm, ke);

	if (rc < 0 && ke->code == 404) {
		memset(out, 0, sizeof(*out));
		return 0;
	}
	if (rc < 0)
		return rc;
	memset(&id, 0, sizeof(id));
	data = json_object_get(cm, "data");
	snprintf(id.id, sizeof(id.id), "%s",
		 ds_json_str(data, "ledgerId") ? ds_json_str(data, "ledgerId") : "");
	snprintf(id.created, sizeof(id.created), "%s",
		 ds_json_str(data, "created") ? ds_json_str(data, "created") : "");
	snprintf(id.target, sizeof(id.target), "%s",
		 ds_json_str(data, "targetName") ? ds_json_str(data, "targetName") : "");
	json_decref(cm);
	*out = id;
	return id.id[0] ? 1 : 0;
}

int ds_ledger_identity_publish(ds_kube *k, const char *ns, const ds_ledger_identity *id,
			       ds_kube_error *ke)
{
	json_t *cm = NULL, *have = NULL;
	char host[256] = "";
	int rc;

	if (gethostname(host, sizeof(host) - 1) < 0)
		snprintf(host, sizeof(host), "unknown");
	cm = json_pack("{ss ss s{ss ss s{ss}} s{ss ss ss}}", "apiVersion", "v1", "kind",
		       "ConfigMap", "metadata", "name", DS_LEDGER_CONFIGMAP, "namespace", ns,
		       "labels", "app.kubernetes.io/managed-by", "drasync", "data", "ledgerId",
		       id->id, "created", id->created, "targetName", host);
	if (!cm)
		return -ENOMEM;
	/* get, then update or create: the RBAC names this one ConfigMap (no list). */
	rc = ds_kube_get(k, &configmaps, ns, DS_LEDGER_CONFIGMAP, NULL, &have, ke);
	if (rc == 0) {
		const char *rv = ds_json_str(json_object_get(have, "metadata"), "resourceVersion");

		json_object_set_new(json_object_get(cm, "metadata"), "resourceVersion",
				    json_string(rv ? rv : ""));
		rc = ds_kube_update(k, &configmaps, ns, cm, NULL, NULL, ke);
	} else if (rc < 0 && ke->code == 404) {
		ds_kube_error_clear(ke);
		rc = ds_kube_create(k, &configmaps, ns, cm, NULL, ke);
	}
	json_decref(have);
	json_decref(cm);
	return rc;
}

int ds_namespace_mode_annotate(ds_kube *k, const char *ns, enum ds_mode mode, int64_t since,
			       const char *by, ds_kube_error *ke)
{
	char when[32];
	json_t *patch;
	int rc;

	rfc3339(since, when, sizeof(when));
	patch = json_pack("{s{s{ss ss ss}}}", "metadata", "annotations", DS_ANNOTATION_MODE,
			  ds_namespace_mode_word(mode), DS_ANNOTATION_MODE_SINCE, when,
			  DS_ANNOTATION_MODE_BY, by ? by : "drasync");
	if (!patch)
		return -ENOMEM;
	rc = ds_kube_merge_patch(k, &namespaces, NULL, ns, patch, NULL, NULL, ke);
	json_decref(patch);
	return rc;
}

/* Append ns to v (n of them) unless it is there. */
static int add_name(const char **v, size_t *n, size_t cap, const char *ns)
{
	if (!ns || !ns[0] || strchr(ns, '*'))
		return 0;
	for (size_t i = 0; i < *n; i++)
		if (strcmp(v[i], ns) == 0)
			return 0;
	if (*n == cap)
		return -E2BIG;
	v[(*n)++] = ns;
	return 0;
}

/* The most target namespaces read back. */
#define MAX_READ_BACK 1024

int ds_namespace_modes_read_back(ds_kube *k, const ds_target_config *cfg, ds_namespace_modes *nm,
				 size_t *found, ds_err *err)
{
	const char **names = calloc(MAX_READ_BACK, sizeof(*names));
	const ds_source_grant *g;
	const ds_namespace_mapping *m;
	size_t n = 0, ng = 0, nmap = 0, got = 0;
	int rc = 0;

	if (!names)
		return ds_err_fallback(err, -ENOMEM);
	g = ds_target_config_sources(cfg, &ng);
	for (size_t i = 0; i < ng; i++)
		for (size_t j = 0; j < g[i].n_namespaces; j++) {
			add_name(names, &n, MAX_READ_BACK, g[i].namespaces[j]);
			add_name(names, &n, MAX_READ_BACK,
				 ds_target_config_map_namespace(cfg, g[i].namespaces[j]));
		}
	m = ds_target_config_namespaces(cfg, &nmap);
	for (size_t i = 0; i < nmap; i++)
		add_name(names, &n, MAX_READ_BACK, m[i].to);
	for (size_t i = 0; rc >= 0 && i < n; i++) {
		json_t *obj = NULL;
		const char *word;
		ds_kube_error ke;

		ds_kube_error_clear(&ke);
		if (ds_kube_get(k, &namespaces, NULL, names[i], NULL, &obj, &ke) < 0)
			continue; /* missing, or not ours to read */
		word = ds_obj_annotation(obj, DS_ANNOTATION_MODE);
		if (word && (strcmp(word, "active") == 0 || strcmp(word, "standby") == 0)) {
			enum ds_mode mode =
			    strcmp(word, "active") == 0 ? DS_MODE_MIGRATE : DS_MODE_STANDBY;
			rc = ds_namespace_modes_get(nm, names[i], NULL, err);
			if (rc == 0)
				rc = ds_namespace_modes_set(nm, names[i], mode, "new-ledger", err);
			if (rc > 0)
				got++;
		}
		json_decref(obj);
	}
	free(names);
	if (rc < 0)
		return rc;
	*found = got;
	return 0;
}

/* The ConfigMap, as the messages name it. */
static void where(const ds_identity_check *c, char *buf, size_t size)
{
	snprintf(buf, size, "ConfigMap %s/%s", c->ns, DS_LEDGER_CONFIGMAP);
}

static int refuse(ds_identity_check *c)
{
	char cm[300];

	where(c, cm, sizeof(cm));
	if (c->verdict == DS_IDENTITY_LOST)
		snprintf(c->msg, sizeof(c->msg),
			 "drasync-target %s: the target cluster had ledger %s (created %s, %s) but "
			 "%s is new: restore the state directory, or run `drasync-target run "
			 "--new-ledger` to start a new ledger (namespace modes are then read back "
			 "from the Namespaces' " DS_ANNOTATION_MODE " annotations)",
			 c->cmd, c->cluster.id, c->cluster.created[0] ? c->cluster.created : "?",
			 cm, c->ledger_path);
	else
		snprintf(
		    c->msg, sizeof(c->msg),
		    "drasync-target %s: %s is ledger %s (created %s) but the target cluster's "
		    "%s names ledger %s (created %s, by %s): another ledger; point stateDir at "
		    "this cluster's ledger, or run `drasync-target run --new-ledger` to make "
		    "%s this cluster's ledger",
		    c->cmd, c->ledger_path, c->ledger.id, c->ledger.created, cm, c->cluster.id,
		    c->cluster.created[0] ? c->cluster.created : "?",
		    c->cluster.target[0] ? c->cluster.target : "?", c->ledger_path);
	return 1;
}

int ds_ledger_identity_check(ds_kube *k, const ds_target_config *cfg, ds_identity_check *c)
{
	ds_namespace_modes *nm = NULL;
	char buf[600], cm[300];
	ds_kube_error ke;
	ds_err err = {0};
	int rc;

	c->msg[0] = '\0';
	c->modes_read = 0;
	ds_ledger_identity_namespace(cfg, c->ns, sizeof(c->ns));
	where(c, cm, sizeof(cm));
	rc = ds_ledger_identity_read(c->ledger_path, &c->ledger, &err);
	if (rc < 0) {
		snprintf(c->msg, sizeof(c->msg), "drasync-target %s: %s: %s", c->cmd,
			 c->ledger_path, err.msg);
		return rc;
	}
	ds_kube_error_clear(&ke);
	rc = ds_ledger_identity_fetch(k, c->ns, &c->cluster, &ke);
	if (rc < 0 && (ke.code == 401 || ke.code == 403)) {
		/* Not a silence to wait out: the RBAC lacks the rule (an upgrade
		 * without the new RBAC, or identity.namespace elsewhere). */
		c->verdict = DS_IDENTITY_VERDICT_MAX;
		snprintf(
		    c->msg, sizeof(c->msg),
		    "drasync-target %s: read %s: %s: the target's RBAC must allow get, create "
		    "and update of that ConfigMap (deploy/kustomize/target/rbac.yaml, Role "
		    "drasync-target-ledger), or set identity.namespace to the agent's namespace",
		    c->cmd, cm, ds_kube_error_format(&ke, buf, sizeof(buf)));
		return 1;
	}
	if (rc < 0) {
		snprintf(c->msg, sizeof(c->msg), "drasync-target %s: read %s: %s", c->cmd, cm,
			 ds_kube_error_format(&ke, buf, sizeof(buf)));
		return rc;
	}
	c->verdict = ds_ledger_identity_decide(c->ledger.id, c->cluster.id, c->new_ledger);
	switch (c->verdict) {
	case DS_IDENTITY_SAME:
		return 0;
	case DS_IDENTITY_LOST:
	case DS_IDENTITY_OTHER:
		return refuse(c);
	case DS_IDENTITY_ADOPT:
		/* The modes first: should it fail, the ledger has no identity yet and
		 * the next start refuses again instead of forgetting them. */
		rc = ds_namespace_modes_open(&nm, c->ledger_path, &err);
		if (rc == 0)
			rc = ds_namespace_modes_read_back(k, cfg, nm, &c->modes_read, &err);
		ds_namespace_modes_free(nm);
		if (rc < 0) {
			snprintf(c->msg, sizeof(c->msg),
				 "drasync-target %s: reading the namespace modes back: %s", c->cmd,
				 err.msg);
			return rc;
		}
		/* fall through */
	case DS_IDENTITY_FIRST:
	case DS_IDENTITY_PUBLISH:
	default:
		break;
	}
	/* The ledger before the cluster: a ConfigMap without its ledger would refuse. */
	rc = ds_ledger_identity_ensure(c->ledger_path, &c->ledger, &err);
	if (rc < 0) {
		snprintf(c->msg, sizeof(c->msg), "drasync-target %s: %s: %s", c->cmd,
			 c->ledger_path, err.msg);
		return rc;
	}
	ds_kube_error_clear(&ke);
	if (ds_ledger_identity_publish(k, c->ns, &c->ledger, &ke) < 0) {
		snprintf(c->msg, sizeof(c->msg),
			 "write %s: %s (the ledger keeps its identity; it is written again at the "
			 "next start: without it a lost ledger is not recognised)",
			 cm, ds_kube_error_format(&ke, buf, sizeof(buf)));
		return 2;
	}
	return 0;
}
