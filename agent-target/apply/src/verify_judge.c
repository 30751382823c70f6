/*
 * The judgement (pure: no I/O): whether what verify_gather.c read of a
 * workload on the target is it running as its form wants, and why not.
 */

#include "verify_internal.h"

#include "drasync/k8s_object.h"
#include "drasync/standby.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the judgement -------------------------------------------------------------------- */

static const char *ledger_note(const ds_verify_item *it, char *buf, size_t size)
{
	if (!it->ledger_state) {
		buf[0] = '\0';
		return buf;
	}
	snprintf(buf, size, " (the ledger says %s%s%s)", it->ledger_state,
		 it->ledger_reason && it->ledger_reason[0] ? ": " : "",
		 it->ledger_reason ? it->ledger_reason : "");
	return buf;
}

/* The DeviceClasses `obj` (a claim or template) names that the target lacks. */
static void missing_classes(const json_t *obj, const char *what, const ds_verify_view *v,
			    struct text *t)
{
	json_t *names = json_array();
	const json_t *n;
	size_t i;

	if (!names)
		return;
	ds_verify_device_classes(obj, names);
	json_array_foreach (names, i, n) {
		const json_t *have = json_object_get(v->classes, json_string_value(n));
		if (json_is_false(have))
			ds_verify_clause(
			    t, "DeviceClass %s (requested by %s) does not exist on the target",
			    json_string_value(n), what);
	}
	json_decref(names);
}

/* The claims and templates the pod template names directly exist. @return true when so */
static bool refs_present(const json_t *obj, const ds_verify_view *v, struct text *t)
{
	const json_t *pod = ds_obj_pod_spec(obj, NULL), *e;
	size_t i;
	bool ok = true;

	json_array_foreach (json_object_get(pod, "resourceClaims"), i, e) {
		const char *c = ds_json_str(e, "resourceClaimName");
		const char *tm = ds_json_str(e, "resourceClaimTemplateName");
		char what[300];

		if (c && json_is_null(json_object_get(v->claims, c))) {
			ds_verify_clause(t, "ResourceClaim %s does not exist on the target", c);
			ok = false;
		}
		if (tm) {
			const json_t *tmpl = json_object_get(v->templates, tm);
			if (json_is_null(tmpl) || json_is_false(tmpl)) {
				ds_verify_clause(
				    t, "ResourceClaimTemplate %s does not exist on the target", tm);
				ok = false;
			} else if (json_is_object(tmpl)) {
				size_t before = t->len;
				snprintf(what, sizeof(what), "ResourceClaimTemplate %s", tm);
				missing_classes(tmpl, what, v, t);
				ok = ok && t->len == before;
			}
		}
	}
	return ok;
}

static void container_problems(const json_t *pod, const char *list, bool running, struct text *t)
{
	const json_t *cs;
	size_t i;
	char path[64];

	snprintf(path, sizeof(path), "status.%s", list);
	json_array_foreach (ds_json_path(pod, path), i, cs) {
		const char *name = ds_json_str(cs, "name");
		const json_t *wt = ds_json_path(cs, "state.waiting");
		const json_t *term = ds_json_path(cs, "state.terminated");

		if (wt) {
			const char *r = ds_json_str(wt, "reason"), *m = ds_json_str(wt, "message");
			/* ContainerCreating and PodInitializing are progress, not a problem. */
			if (!running && r &&
			    (strcmp(r, "ContainerCreating") == 0 ||
			     strcmp(r, "PodInitializing") == 0))
				continue;
			ds_verify_clause(t, "container %s is waiting: %s%s%s", name ? name : "?",
					 r ? r : "no reason", m && m[0] ? ": " : "", m ? m : "");
		} else if (term && running) {
			const char *r = ds_json_str(term, "reason");
			json_int_t code = json_integer_value(json_object_get(term, "exitCode"));
			ds_verify_clause(t, "container %s exited: %s (exit code %lld)",
					 name ? name : "?", r ? r : "terminated", (long long)code);
		}
	}
}

/*
 * Whether one pod is as it should be; why not into t. done_ok: Succeeded
 * counts (a Job's pod, a bare Pod that is not restarted); its claims are then
 * released, so they are not looked at.
 */
static bool pod_ok(const json_t *pod, const ds_verify_view *v, bool done_ok, size_t *claims,
		   struct text *t)
{
	const char *name = ds_obj_name(pod), *phase = ds_verify_str_at(pod, "status.phase");
	const json_t *sched = ds_verify_condition(pod, "PodScheduled"), *cn;
	json_t *names = json_array();
	size_t before = t->len, i;
	bool running = phase && strcmp(phase, "Running") == 0;

	if (!name)
		name = "?";
	if (phase && strcmp(phase, "Succeeded") == 0) {
		json_decref(names);
		if (!done_ok)
			ds_verify_clause(t, "pod %s has Succeeded: its containers exited", name);
		return done_ok;
	}
	if (phase && strcmp(phase, "Failed") == 0) {
		const char *r = ds_verify_str_at(pod, "status.reason"),
			   *m = ds_verify_str_at(pod, "status.message");
		ds_verify_clause(t, "pod %s Failed%s%s%s%s", name, r ? ": " : "", r ? r : "",
				 m && m[0] ? ": " : "", m ? m : "");
		json_decref(names);
		return false;
	}
	if (ds_verify_cond_is(sched, "False"))
		ds_verify_clause(t, "pod %s is not scheduled: %s", name,
				 ds_verify_cond_text(sched));
	else if (!ds_verify_str_at(pod, "spec.nodeName"))
		ds_verify_clause(t, "pod %s waits for the scheduler", name);
	/* Every claim it uses is allocated; a missing DeviceClass is the usual cause. */
	if (names)
		ds_verify_pod_claims(pod, names);
	json_array_foreach (names, i, cn) {
		const char *c = json_string_value(cn);
		const json_t *claim = json_object_get(v->claims, c);
		char what[300];

		if (!claim || json_is_null(claim)) {
			ds_verify_clause(t, "ResourceClaim %s of pod %s does not exist", c, name);
			continue;
		}
		if (ds_json_path(claim, "status.allocation")) {
			(*claims)++;
			continue;
		}
		ds_verify_clause(t, "ResourceClaim %s of pod %s is not allocated", c, name);
		snprintf(what, sizeof(what), "ResourceClaim %s", c);
		missing_classes(claim, what, v, t);
	}
	json_decref(names);
	container_problems(pod, "initContainerStatuses", false, t);
	container_problems(pod, "containerStatuses", running, t);
	if (!running && t->len == before)
		ds_verify_clause(t, "pod %s is %s", name, phase ? phase : "without a phase yet");
	return t->len == before;
}

/* The controller's own account of why it has not made its pods. */
static void controller_says(const json_t *obj, struct text *t)
{
	const json_t *c = ds_verify_condition(obj, "ReplicaFailure");

	if (ds_verify_cond_is(c, "True")) {
		ds_verify_clause(t, "%s", ds_verify_cond_text(c));
		return;
	}
	c = ds_verify_condition(obj, "Progressing");
	if (ds_verify_cond_is(c, "False"))
		ds_verify_clause(t, "%s", ds_verify_cond_text(c));
}

static int pod_cmp(const void *a, const void *b)
{
	const char *x = ds_obj_name(*(json_t *const *)a), *y = ds_obj_name(*(json_t *const *)b);

	return strcmp(x ? x : "", y ? y : "");
}

/*
 * The pods against what is wanted: want of them, each ok. On success the
 * summary ("2/2 pods Running, 2 claims allocated"), else the first pod that is
 * not and how many more are not.
 */
static bool pods_ok(const ds_verify_view *v, json_int_t want, bool job, struct text *t)
{
	size_t n = json_array_size(v->pods), bad = 0, claims = 0, i, ok = 0;
	const json_t **sorted = n ? calloc(n, sizeof(*sorted)) : NULL;
	char first[DS_VERIFY_REASON_MAX] = "";

	if (n && !sorted) {
		ds_verify_clause(t, "out of memory");
		return false;
	}
	for (i = 0; i < n; i++)
		sorted[i] = json_array_get(v->pods, i);
	if (n)
		qsort(sorted, n, sizeof(*sorted), pod_cmp);
	for (i = 0; i < n; i++) {
		struct text pt = {first, sizeof(first), 0};
		char scratch[DS_VERIFY_REASON_MAX];
		struct text st = {scratch, sizeof(scratch), 0};

		if (pod_ok(sorted[i], v, job, &claims, bad ? &st : &pt))
			ok++;
		else
			bad++;
	}
	free(sorted);
	if (bad) {
		ds_verify_clause(t, "%s", first);
		if (bad > 1)
			ds_verify_addf(t, " (and %zu more pod%s not running)", bad - 1,
				       bad == 2 ? "" : "s");
		return false;
	}
	if ((json_int_t)n < want) {
		ds_verify_clause(t, "%zu of %lld pods exist", n, (long long)want);
		controller_says(v->obj, t);
		return false;
	}
	ds_verify_addf(t, "%zu/%lld pods %s", ok, (long long)want,
		       job ? "Running or Succeeded" : "Running");
	if (claims)
		ds_verify_addf(t, ", %zu claim%s allocated", claims, claims == 1 ? "" : "s");
	return true;
}

static bool judge_standby(ds_verify_item *it, const ds_verify_view *v, int w, struct text *t)
{
	const json_t *obj = v->obj;

	if (it->held) {
		if (!obj) {
			ds_verify_addf(t, "held in the ledger, not on the cluster");
			return true;
		}
		ds_verify_clause(t,
				 "%s %s/%s is on the cluster though the ledger holds it (standby)",
				 it->kind, it->ns, it->name);
		return false;
	}
	switch ((enum ds_workload)w) {
	case DS_WORKLOAD_DEPLOYMENT:
	case DS_WORKLOAD_STATEFULSET:
	case DS_WORKLOAD_REPLICASET: {
		json_t *r = ds_json_path(obj, "spec.replicas");
		json_int_t n = json_is_integer(r) ? json_integer_value(r) : 1;
		const char *src = ds_obj_annotation(obj, DS_ANNOTATION_REPLICAS);
		if (n != 0) {
			ds_verify_clause(t, "not parked: spec.replicas is %lld, standby wants 0",
					 (long long)n);
			return false;
		}
		if (!src) {
			ds_verify_clause(t, "replicas 0 but no annotation " DS_ANNOTATION_REPLICAS
					    ": failover would not know the source count");
			return false;
		}
		ds_verify_addf(
		    t, "parked: replicas 0 (source count %s in " DS_ANNOTATION_REPLICAS ")", src);
		return true;
	}
	case DS_WORKLOAD_CRONJOB:
		if (!json_is_true(ds_json_path(obj, "spec.suspend"))) {
			ds_verify_clause(t, "not parked: the CronJob is not suspended");
			return false;
		}
		ds_verify_addf(t, "parked: suspended");
		return true;
	case DS_WORKLOAD_DAEMONSET: {
		const json_t *sel = json_object_get(ds_obj_pod_spec(obj, NULL), "nodeSelector");
		if (!json_object_get(sel, DS_STANDBY_NODE_LABEL)) {
			ds_verify_clause(t, "not parked: no nodeSelector " DS_STANDBY_NODE_LABEL);
			return false;
		}
		ds_verify_addf(t, "parked: nodeSelector " DS_STANDBY_NODE_LABEL "=%s",
			       json_string_value(json_object_get(sel, DS_STANDBY_NODE_LABEL)));
		return true;
	}
	default:
		ds_verify_clause(
		    t, "%s %s/%s runs on the cluster; standby holds Pods and Jobs in the ledger",
		    it->kind, it->ns, it->name);
		return false;
	}
}

static bool judge_active(ds_verify_item *it, const ds_verify_view *v, int w, struct text *t)
{
	const json_t *obj = v->obj;

	switch ((enum ds_workload)w) {
	case DS_WORKLOAD_DEPLOYMENT:
	case DS_WORKLOAD_STATEFULSET:
	case DS_WORKLOAD_REPLICASET: {
		json_t *r = ds_json_path(obj, "spec.replicas");
		json_int_t n = json_is_integer(r) ? json_integer_value(r) : 1;
		const char *src = ds_obj_annotation(obj, DS_ANNOTATION_REPLICAS);
		if (n == 0 && src && strcmp(src, "0") != 0) {
			ds_verify_clause(
			    t,
			    "still parked: replicas 0 (source count %s in " DS_ANNOTATION_REPLICAS
			    ")",
			    src);
			return false;
		}
		if (n == 0 && !json_array_size(v->pods)) {
			ds_verify_addf(t, "0 replicas wanted");
			return true;
		}
		return pods_ok(v, n, false, t);
	}
	case DS_WORKLOAD_DAEMONSET: {
		const json_t *sel = json_object_get(ds_obj_pod_spec(obj, NULL), "nodeSelector");
		const json_t *d = ds_json_path(obj, "status.desiredNumberScheduled");
		if (json_object_get(sel, DS_STANDBY_NODE_LABEL)) {
			ds_verify_clause(t, "still parked: nodeSelector " DS_STANDBY_NODE_LABEL);
			return false;
		}
		if (!json_is_integer(d)) {
			ds_verify_clause(t,
					 "the DaemonSet controller has not counted its nodes yet");
			return false;
		}
		if (json_integer_value(d) == 0) {
			ds_verify_clause(
			    t, "no node of the target takes it (desiredNumberScheduled 0): "
			       "see its nodeSelector, affinity and tolerations");
			return false;
		}
		return pods_ok(v, json_integer_value(d), false, t);
	}
	case DS_WORKLOAD_JOB: {
		const json_t *c = ds_verify_condition(obj, "Complete");
		if (ds_verify_cond_is(c, "True")) {
			ds_verify_addf(t, "complete");
			return true;
		}
		c = ds_verify_condition(obj, "Failed");
		if (ds_verify_cond_is(c, "True")) {
			ds_verify_clause(t, "the Job failed: %s", ds_verify_cond_text(c));
			return false;
		}
		if (json_is_true(ds_json_path(obj, "spec.suspend"))) {
			ds_verify_clause(t, "the Job is suspended");
			return false;
		}
		if (!json_array_size(v->pods)) {
			ds_verify_clause(t, "the Job has no pod yet");
			return false;
		}
		return pods_ok(v, 1, true, t);
	}
	case DS_WORKLOAD_CRONJOB: {
		const char *was = ds_obj_annotation(obj, DS_ANNOTATION_SUSPEND);
		if (!json_is_true(ds_json_path(obj, "spec.suspend"))) {
			ds_verify_addf(t,
				       "exists, not suspended (no pods until its schedule fires)");
			return true;
		}
		if (was && strcmp(was, "true") == 0) {
			ds_verify_addf(t, "exists, suspended as on the source");
			return true;
		}
		ds_verify_clause(t, "%s: the CronJob is suspended",
				 was ? "still parked" : "suspended");
		return false;
	}
	case DS_WORKLOAD_POD: {
		const char *restart = ds_verify_str_at(obj, "spec.restartPolicy");
		const char *phase = ds_verify_str_at(obj, "status.phase");
		size_t claims = 0;
		size_t before = t->len;
		if (!pod_ok(obj, v, restart && strcmp(restart, "Always") != 0, &claims, t))
			return false;
		t->len = before;
		ds_verify_addf(t, "%s", phase ? phase : "Running");
		if (claims)
			ds_verify_addf(t, ", %zu claim%s allocated", claims,
				       claims == 1 ? "" : "s");
		return true;
	}
	default:
		ds_verify_clause(t, "%s is not a workload kind drasync verifies", it->kind);
		return false;
	}
}

int ds_verify_judge(ds_verify_item *it, const ds_verify_view *v)
{
	struct text t = {it->reason, sizeof(it->reason), 0};
	char problems[DS_VERIFY_REASON_MAX] = "", note[600];
	struct text refs = {problems, sizeof(problems), 0};
	int w = ds_workload_from_kind(it->kind);
	bool ok;

	it->reason[0] = '\0';
	if (!v->obj && !(it->form == DS_VERIFY_STANDBY && it->held)) {
		ds_verify_addf(&t, "%s %s/%s does not exist on the target%s", it->kind, it->ns,
			       it->name, ledger_note(it, note, sizeof(note)));
		it->verified = false;
		return 0;
	}
	if (v->obj && !refs_present(v->obj, v, &refs)) {
		/* What the pods need is missing: that is the reason, whatever else. */
		ds_verify_addf(&t, "%s", problems);
		it->verified = false;
		return 0;
	}
	ok = it->form == DS_VERIFY_STANDBY ? judge_standby(it, v, w, &t)
					   : judge_active(it, v, w, &t);
	it->verified = ok;
	return ok ? 1 : 0;
}
