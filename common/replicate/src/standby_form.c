#include "drasync/standby_form.h"

#include "drasync/k8s_object.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_was(char *was, size_t size, const char *v)
{
	if (was && size)
		snprintf(was, size, "%s", v);
}

static int scale_down(json_t *obj, char *was, size_t size)
{
	json_t *spec = ds_json_object_ensure(obj, "spec");
	json_t *rep_v = json_object_get(spec, "replicas");
	/* Kubernetes defaults replicas to 1 when it is not set. */
	json_int_t n = json_is_integer(rep_v) ? json_integer_value(rep_v) : 1;
	char from[32];

	if (!spec)
		return DS_STANDBY_FORM_NONE;
	snprintf(from, sizeof(from), "%lld", (long long)n);
	if (ds_obj_set_annotation(obj, DS_ANNOTATION_REPLICAS, from) < 0 ||
	    json_object_set_new(spec, "replicas", json_integer(0)) < 0)
		return -ENOMEM;
	set_was(was, size, from);
	return DS_STANDBY_FORM_SCALED;
}

static int suspend(json_t *obj, char *was, size_t size)
{
	json_t *spec = ds_json_object_ensure(obj, "spec");
	int before = json_is_true(json_object_get(spec, "suspend"));

	if (!spec)
		return DS_STANDBY_FORM_NONE;
	if (ds_obj_set_annotation(obj, DS_ANNOTATION_SUSPEND, before ? "true" : "false") < 0 ||
	    json_object_set_new(spec, "suspend", json_true()) < 0)
		return -ENOMEM;
	set_was(was, size, before ? "true" : "false");
	return DS_STANDBY_FORM_SUSPENDED;
}

static int park_daemons(json_t *obj, char *was, size_t size)
{
	json_t *pod = ds_obj_pod_spec(obj, NULL);
	json_t *sel = pod ? ds_json_object_ensure(pod, "nodeSelector") : NULL;

	if (!sel)
		return DS_STANDBY_FORM_NONE;
	if (json_object_set_new(sel, DS_STANDBY_NODE_LABEL, json_string("true")) < 0 ||
	    ds_obj_set_annotation(obj, DS_ANNOTATION_STANDBY, "true") < 0)
		return -ENOMEM;
	set_was(was, size, "");
	return DS_STANDBY_FORM_PARKED;
}

int ds_standby_form_park(json_t *obj, char *was, size_t size)
{
	int w = ds_workload_from_kind(ds_obj_kind(obj));

	set_was(was, size, "");
	if (w < 0)
		return DS_STANDBY_FORM_NONE;
	switch ((enum ds_workload)w) {
	case DS_WORKLOAD_DEPLOYMENT:
	case DS_WORKLOAD_STATEFULSET:
	case DS_WORKLOAD_REPLICASET:
		return scale_down(obj, was, size);
	case DS_WORKLOAD_CRONJOB:
		return suspend(obj, was, size);
	case DS_WORKLOAD_DAEMONSET:
		return park_daemons(obj, was, size);
	case DS_WORKLOAD_POD:
	case DS_WORKLOAD_JOB:
		return DS_STANDBY_FORM_HOLD;
	default:
		return DS_STANDBY_FORM_NONE;
	}
}

static const char *annotation(const json_t *obj, const char *key)
{
	json_t *a = json_object_get(json_object_get(obj, "metadata"), "annotations");

	return json_string_value(json_object_get(a, key));
}

int ds_standby_form_is_parked(const json_t *obj)
{
	int w = ds_workload_from_kind(ds_obj_kind(obj));
	const json_t *spec = json_object_get(obj, "spec");
	json_t *pod;

	if (w < 0)
		return 0;
	switch ((enum ds_workload)w) {
	case DS_WORKLOAD_DEPLOYMENT:
	case DS_WORKLOAD_STATEFULSET:
	case DS_WORKLOAD_REPLICASET:
		return annotation(obj, DS_ANNOTATION_REPLICAS) &&
		       json_integer_value(json_object_get(spec, "replicas")) == 0 &&
		       json_is_integer(json_object_get(spec, "replicas"));
	case DS_WORKLOAD_CRONJOB:
		return annotation(obj, DS_ANNOTATION_SUSPEND) &&
		       json_is_true(json_object_get(spec, "suspend"));
	case DS_WORKLOAD_DAEMONSET:
		pod = ds_obj_pod_spec(obj, NULL);
		return annotation(obj, DS_ANNOTATION_STANDBY) &&
		       json_object_get(json_object_get(pod, "nodeSelector"), DS_STANDBY_NODE_LABEL);
	default:
		return 0;
	}
}

static void drop_annotation(json_t *obj, const char *key)
{
	json_t *a = json_object_get(json_object_get(obj, "metadata"), "annotations");

	json_object_del(a, key);
}

int ds_standby_form_unpark(json_t *obj)
{
	int w = ds_workload_from_kind(ds_obj_kind(obj));
	json_t *spec = json_object_get(obj, "spec"), *pod, *sel;
	const char *v;
	char *end;
	long long n;

	if (w < 0 || !ds_standby_form_is_parked(obj))
		return 0;
	switch ((enum ds_workload)w) {
	case DS_WORKLOAD_DEPLOYMENT:
	case DS_WORKLOAD_STATEFULSET:
	case DS_WORKLOAD_REPLICASET:
		v = annotation(obj, DS_ANNOTATION_REPLICAS);
		n = strtoll(v, &end, 10);
		if (*end || n < 0 || n > 1000000000)
			n = 1;
		if (json_object_set_new(spec, "replicas", json_integer(n)) < 0)
			return -ENOMEM;
		drop_annotation(obj, DS_ANNOTATION_REPLICAS);
		return 1;
	case DS_WORKLOAD_CRONJOB:
		v = annotation(obj, DS_ANNOTATION_SUSPEND);
		if (json_object_set_new(spec, "suspend", json_boolean(strcmp(v, "true") == 0)) < 0)
			return -ENOMEM;
		drop_annotation(obj, DS_ANNOTATION_SUSPEND);
		return 1;
	case DS_WORKLOAD_DAEMONSET:
		pod = ds_obj_pod_spec(obj, NULL);
		sel = json_object_get(pod, "nodeSelector");
		json_object_del(sel, DS_STANDBY_NODE_LABEL);
		if (json_object_size(sel) == 0)
			json_object_del(pod, "nodeSelector");
		drop_annotation(obj, DS_ANNOTATION_STANDBY);
		return 1;
	default:
		return 0;
	}
}
