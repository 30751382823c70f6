#include "drasync/standby.h"

#include "drasync/k8s_object.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int scale_down(json_t *obj, const char *what, ds_report *rep)
{
	json_t *spec = ds_json_object_ensure(obj, "spec");
	json_t *rep_v = json_object_get(spec, "replicas");
	/* Kubernetes defaults replicas to 1 when it is not set. */
	json_int_t n = json_is_integer(rep_v) ? json_integer_value(rep_v) : 1;
	char from[32];

	if (!spec)
		return 0;
	snprintf(from, sizeof(from), "%lld", (long long)n);
	if (ds_obj_set_annotation(obj, DS_ANNOTATION_REPLICAS, from) < 0 ||
	    json_object_set_new(spec, "replicas", json_integer(0)) < 0)
		return -ENOMEM;
	ds_report_add(rep, DS_REPORT_STANDBY, what, NULL, NULL, from, "0",
		      "(replicas; source count kept in annotation " DS_ANNOTATION_REPLICAS ")");
	return DS_STANDBY_CHANGED;
}

static int suspend(json_t *obj, const char *what, ds_report *rep)
{
	json_t *spec = ds_json_object_ensure(obj, "spec");
	int was = json_is_true(json_object_get(spec, "suspend"));

	if (!spec)
		return 0;
	if (ds_obj_set_annotation(obj, DS_ANNOTATION_SUSPEND, was ? "true" : "false") < 0 ||
	    json_object_set_new(spec, "suspend", json_true()) < 0)
		return -ENOMEM;
	ds_report_add(rep, DS_REPORT_STANDBY, what, NULL, NULL,
		      was ? "suspend=true" : "suspend=false", "suspend=true", NULL);
	return DS_STANDBY_CHANGED;
}

static int park(json_t *obj, const char *what, ds_report *rep)
{
	json_t *pod = ds_obj_pod_spec(obj, NULL);
	json_t *sel = pod ? ds_json_object_ensure(pod, "nodeSelector") : NULL;

	if (!sel)
		return 0;
	if (json_object_set_new(sel, DS_STANDBY_NODE_LABEL, json_string("true")) < 0 ||
	    ds_obj_set_annotation(obj, DS_ANNOTATION_STANDBY, "true") < 0)
		return -ENOMEM;
	ds_report_add(rep, DS_REPORT_STANDBY, what, NULL, NULL, NULL,
		      "nodeSelector " DS_STANDBY_NODE_LABEL "=true",
		      "(no node carries this label, so no daemon pod runs)");
	return DS_STANDBY_CHANGED;
}

int ds_standby_apply(json_t *obj, ds_report *rep)
{
	int w = ds_workload_from_kind(ds_obj_kind(obj));
	char what[300];

	if (w < 0)
		return DS_STANDBY_UNCHANGED;
	ds_obj_describe(obj, what, sizeof(what));
	switch ((enum ds_workload)w) {
	case DS_WORKLOAD_DEPLOYMENT:
	case DS_WORKLOAD_STATEFULSET:
	case DS_WORKLOAD_REPLICASET:
		return scale_down(obj, what, rep);
	case DS_WORKLOAD_CRONJOB:
		return suspend(obj, what, rep);
	case DS_WORKLOAD_DAEMONSET:
		return park(obj, what, rep);
	case DS_WORKLOAD_POD:
	case DS_WORKLOAD_JOB:
		ds_report_add(rep, DS_REPORT_HOLD, what, NULL, NULL, NULL, NULL,
			      "standby: held in the target's ledger until failover");
		return DS_STANDBY_HOLD;
	default:
		return DS_STANDBY_UNCHANGED;
	}
}
