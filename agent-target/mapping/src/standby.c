#include "drasync/standby.h"

#include "drasync/k8s_object.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The form itself is common/replicate's (standby_form.h): here it is reported. */
int ds_standby_apply(json_t *obj, ds_report *rep)
{
	char what[300], was[32];
	int f;

	if (ds_workload_from_kind(ds_obj_kind(obj)) < 0)
		return DS_STANDBY_UNCHANGED;
	ds_obj_describe(obj, what, sizeof(what));
	f = ds_standby_form_park(obj, was, sizeof(was));
	switch (f) {
	case DS_STANDBY_FORM_SCALED:
		ds_report_add(rep, DS_REPORT_STANDBY, what, NULL, NULL, was, "0",
			      "(replicas; source count kept in annotation " DS_ANNOTATION_REPLICAS
			      ")");
		return DS_STANDBY_CHANGED;
	case DS_STANDBY_FORM_SUSPENDED:
		ds_report_add(rep, DS_REPORT_STANDBY, what, NULL, NULL,
			      strcmp(was, "true") == 0 ? "suspend=true" : "suspend=false",
			      "suspend=true", NULL);
		return DS_STANDBY_CHANGED;
	case DS_STANDBY_FORM_PARKED:
		ds_report_add(rep, DS_REPORT_STANDBY, what, NULL, NULL, NULL,
			      "nodeSelector " DS_STANDBY_NODE_LABEL "=true",
			      "(no node carries this label, so no daemon pod runs)");
		return DS_STANDBY_CHANGED;
	case DS_STANDBY_FORM_HOLD:
		ds_report_add(rep, DS_REPORT_HOLD, what, NULL, NULL, NULL, NULL,
			      "standby: held in the target's ledger until failover");
		return DS_STANDBY_HOLD;
	default:
		return f < 0 ? f : DS_STANDBY_UNCHANGED;
	}
}
