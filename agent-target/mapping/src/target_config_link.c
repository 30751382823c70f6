#include "target_config_link.h"

#include "drasync/duration.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#define KiB (1024ll)
#define MiB (1024ll * 1024ll)

void ds_target_link_default(ds_target_link *l)
{
	l->handshake_timeout_ms = 5000;
	l->max_frame_bytes = 8 * MiB;
	l->max_unauth = 64;
	l->max_unauth_per_address = 8;
	l->refusal_window_ms = 60000;
}

/* A duration member in milliseconds within [lo, hi]; *out kept when absent. */
static int duration(ds_config_walk *w, const json_t *link, const char *key, long long lo,
		    long long hi, const char *bounds, int *out)
{
	const char *s;
	size_t col = 0;
	long long ms = 0;
	ds_err derr = {0};
	ds_config_mark m;
	int r;

	if (json_is_number(json_object_get(link, key))) {
		m = ds_config_push_key(w, key);
		r = ds_config_fail(w, false,
				   "a number needs a unit: write a Go duration such as %s", bounds);
		ds_config_pop(w, m);
		return r;
	}
	if ((r = ds_config_member_str(w, link, key, &s)) < 0 || !s)
		return r;
	m = ds_config_push_key(w, key);
	if (ds_duration_parse_ms(s, &ms, &col, &derr) < 0)
		r = col ? ds_config_fail_in_value(w, col - 1, "%s (a Go duration such as %s)",
						  derr.msg, bounds)
			: ds_config_fail(w, false, "%s (a Go duration such as %s)", derr.msg,
					 bounds);
	else if (ms < lo || ms > hi)
		r = ds_config_fail(w, false, "%s is out of bounds (%s)", s, bounds);
	else
		*out = (int)ms;
	ds_config_pop(w, m);
	return r;
}

int ds_target_config_load_link(ds_config_walk *w, const json_t *root, ds_target_link *out)
{
	static const char *const keys[] = {"handshakeTimeout",	 "maxFrameBytes",
					   "maxUnauthenticated", "maxUnauthenticatedPerAddress",
					   "refusalLogWindow",	 NULL};
	ds_target_link l;
	long long frame, total, per;
	json_t *link;
	ds_config_mark m;
	int r;

	ds_target_link_default(&l);
	if ((r = ds_config_member(w, root, "link", JSON_OBJECT, &link)) < 0)
		return r;
	if (!link) {
		*out = l;
		return 0;
	}
	m = ds_config_push_key(w, "link");
	frame = (long long)l.max_frame_bytes;
	total = l.max_unauth;
	per = l.max_unauth_per_address;
	if ((r = ds_config_check_keys(w, link, keys)) < 0 ||
	    (r = duration(w, link, "handshakeTimeout", 100, 300000, "100ms to 5m, default 5s",
			  &l.handshake_timeout_ms)) < 0 ||
	    (r = ds_config_member_int_range(w, link, "maxFrameBytes", 64 * KiB, 128 * MiB,
					    "65536 to 134217728, default 8388608", &frame)) < 0 ||
	    (r = ds_config_member_int_range(w, link, "maxUnauthenticated", 1,
					    DS_TARGET_LINK_UNAUTH_MAX, "1 to 1024, default 64",
					    &total)) < 0 ||
	    (r = ds_config_member_int_range(w, link, "maxUnauthenticatedPerAddress", 1,
					    DS_TARGET_LINK_UNAUTH_MAX, "1 to 1024, default 8",
					    &per)) < 0 ||
	    (r = duration(w, link, "refusalLogWindow", 1000, 3600000, "1s to 1h, default 1m",
			  &l.refusal_window_ms)) < 0)
		goto out;
	if (per > total) {
		ds_config_mark k =
		    ds_config_push_key(w, json_object_get(link, "maxUnauthenticatedPerAddress")
					      ? "maxUnauthenticatedPerAddress"
					      : "maxUnauthenticated");
		r = ds_config_fail(w, false,
				   "maxUnauthenticatedPerAddress (%lld) must not exceed "
				   "maxUnauthenticated (%lld)",
				   per, total);
		ds_config_pop(w, k);
		goto out;
	}
	l.max_frame_bytes = (uint64_t)frame;
	l.max_unauth = (unsigned)total;
	l.max_unauth_per_address = (unsigned)per;
	*out = l;
out:
	ds_config_pop(w, m);
	return r;
}

int ds_target_config_load_api_server(ds_config_walk *w, const json_t *root, int *max_in_flight)
{
	static const char *const keys[] = {"maxInFlight", NULL};
	long long n = DS_TARGET_API_IN_FLIGHT_DEFAULT;
	json_t *api;
	ds_config_mark m;
	int r;

	*max_in_flight = (int)n;
	if ((r = ds_config_member(w, root, "apiServer", JSON_OBJECT, &api)) < 0 || !api)
		return r;
	m = ds_config_push_key(w, "apiServer");
	if ((r = ds_config_check_keys(w, api, keys)) == 0 &&
	    (r = ds_config_member_int_range(w, api, "maxInFlight", 1, DS_TARGET_API_IN_FLIGHT_MAX,
					    DS_TARGET_API_IN_FLIGHT_BOUNDS, &n)) == 0)
		*max_in_flight = (int)n;
	ds_config_pop(w, m);
	return r;
}
