/*
 * The quota keys of a TargetConfig: `limits:` (each source's defaults) and
 * the maxUnappliedRecords / maxLedgerBytes of a sources[] entry. A byte
 * quantity is an integer or a string with a binary (Ki, Mi, Gi, Ti) or
 * decimal (k, M, G, T) suffix, as Kubernetes writes quantities
 * (common/base quantity.c, which the source's target.bandwidth reads too).
 */
#include "target_config_internal.h"

#include "drasync/quantity.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* A byte quantity at member key of obj (absent: *out untouched, *set false). */
static int member_bytes(ds_config_walk *w, const json_t *obj, const char *key, uint64_t *out,
			bool *set)
{
	const json_t *v = json_object_get(obj, key);
	ds_config_mark m;
	size_t bad = 0;
	int r = 0;

	if (set)
		*set = false;
	if (!v)
		return 0;
	m = ds_config_push_key(w, key);
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		*out = (uint64_t)json_integer_value(v);
	} else if (json_is_string(v)) {
		r = ds_quantity_parse_bytes(json_string_value(v), out, &bad);
		if (r == -ERANGE)
			r = ds_config_fail(w, false, "'%s' is too large", json_string_value(v));
		else if (r < 0)
			r = ds_config_fail_in_value(
			    w, bad,
			    "expected a byte quantity (like 2Gi; suffixes Ki "
			    "Mi Gi Ti k M G T; 0: unlimited), found '%s'",
			    json_string_value(v));
	} else {
		r = ds_config_fail(
		    w, false, "expected a byte quantity (like 2Gi, or 0: unlimited), found %s",
		    json_is_integer(v) ? "a negative integer" : ds_config_type_name(v));
	}
	ds_config_pop(w, m);
	if (r == 0 && set)
		*set = true;
	return r;
}

/* A record count of at least 1 at member key of obj (absent: *set false). */
static int member_count(ds_config_walk *w, const json_t *obj, const char *key, uint64_t *out,
			bool *set)
{
	json_t *v = NULL;
	int r;

	if (set)
		*set = false;
	if ((r = ds_config_member(w, obj, key, JSON_INTEGER, &v)) < 0 || !v)
		return r;
	if (json_integer_value(v) < 1) {
		ds_config_mark m = ds_config_push_key(w, key);
		r = ds_config_fail(w, false, "must be at least 1 (a record count), found %lld",
				   (long long)json_integer_value(v));
		ds_config_pop(w, m);
		return r;
	}
	*out = (uint64_t)json_integer_value(v);
	if (set)
		*set = true;
	return 0;
}

int ds_target_config_load_limits(ds_config_walk *w, const json_t *limits, ds_target_limits *out)
{
	static const char *const keys[] = {"sourceMaxUnappliedRecords", "sourceMaxLedgerBytes",
					   NULL};
	int r;

	if (!json_is_object(limits))
		return ds_config_fail(w, false,
				      "expected a mapping {sourceMaxUnappliedRecords, "
				      "sourceMaxLedgerBytes}, found %s",
				      ds_config_type_name(limits));
	if ((r = ds_config_check_keys(w, limits, keys)) < 0 ||
	    (r = member_count(w, limits, "sourceMaxUnappliedRecords", &out->source_max_unapplied,
			      NULL)) < 0 ||
	    (r = member_bytes(w, limits, "sourceMaxLedgerBytes", &out->source_max_ledger_bytes,
			      NULL)) < 0)
		return r;
	return 0;
}

int ds_target_config_load_grant_limits(ds_config_walk *w, const json_t *entry, ds_source_grant *g)
{
	int r;

	if ((r = member_count(w, entry, "maxUnappliedRecords", &g->max_unapplied,
			      &g->has_max_unapplied)) < 0 ||
	    (r = member_bytes(w, entry, "maxLedgerBytes", &g->max_ledger_bytes,
			      &g->has_max_ledger_bytes)) < 0)
		return r;
	return 0;
}
