/* `drasync-source status` without a cluster: when a source needs attention, and its JSON. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/source_status.h"

#include <stdio.h>
#include <string.h>

struct fixture {
	ds_export_status st;
	ds_index_kind_count kinds[1];
	ds_agent_state as;
	ds_source_status v;
};

/* A watch agent, running and linked, everything applied: healthy. */
static void healthy(struct fixture *f)
{
	memset(f, 0, sizeof(*f));
	snprintf(f->kinds[0].kind, sizeof(f->kinds[0].kind), "ConfigMap");
	f->kinds[0].objects = 3;
	f->kinds[0].applied = 3;
	f->st.kinds = f->kinds;
	f->st.n_kinds = 1;
	f->st.outbox.last_seq = 3;
	f->st.outbox.acked_seq = 3;
	f->as.pid = 4242;
	f->as.connected = true;
	snprintf(f->as.schedule, sizeof(f->as.schedule), "watch");
	snprintf(f->as.endpoint, sizeof(f->as.endpoint), "tcp://target:7450");
	f->v.st = &f->st;
	f->v.as = &f->as;
	f->v.running = true;
}

static void expect(const struct fixture *f, const char *why)
{
	const char *got = ds_source_status_attention(&f->v);

	if (!why)
		assert_null(got);
	else
		assert_string_equal(got, why);
}

static void test_source_status__attention(void **state)
{
	struct fixture f;

	(void)state;
	healthy(&f);
	expect(&f, NULL);
	f.as.connected = false;
	expect(&f, "the link to the target is down");
	f.v.running = false;
	expect(&f, "the agent is not running");
	/* A once run is meant to have stopped: only records left unacknowledged count. */
	snprintf(f.as.schedule, sizeof(f.as.schedule), "once");
	expect(&f, NULL);
	f.st.backlog = 2;
	expect(&f, "records the target has not acknowledged");
	f.v.running = true;
	expect(&f, NULL);
	f.v.as = NULL;
	expect(&f, "the agent never started here");
	f.st.last_pass_rc = -5;
	expect(&f, "the last pass failed");
	/* The target's refusals come before the rest, its failures first. */
	f.kinds[0].refused = 1;
	expect(&f, "the target refused objects (outside what it grants this source)");
	f.kinds[0].failed = 1;
	expect(&f, "the target failed objects");
}

/* Refused objects in the JSON: a count per kind and each with its reason (issue 22). */
static void test_source_status__json_refusals(void **state)
{
	struct fixture f;
	ds_export_failure refused = {.key = "/ConfigMap/hz-denied/b",
				     .kind = "ConfigMap",
				     .ns = "hz-denied",
				     .name = "b",
				     .status = DS_RESULT_REFUSED,
				     .seq = 2,
				     .message = "namespace hz-denied is not granted to source "
						"prod-east (sources[0].namespaces)"};
	json_t *doc, *k, *fl;

	(void)state;
	healthy(&f);
	f.kinds[0].refused = 1;
	f.st.failures = &refused;
	f.st.n_failures = 1;
	doc = ds_source_status_json(&f.v);
	assert_non_null(doc);
	k = json_array_get(json_object_get(doc, "kinds"), 0);
	assert_int_equal(json_integer_value(json_object_get(k, "refused")), 1);
	assert_int_equal(json_integer_value(json_object_get(k, "failed")), 0);
	fl = json_array_get(json_object_get(doc, "failures"), 0);
	assert_string_equal(json_string_value(json_object_get(fl, "status")), "refused");
	assert_string_equal(json_string_value(json_object_get(fl, "namespace")), "hz-denied");
	assert_string_equal(json_string_value(json_object_get(fl, "message")), refused.message);
	assert_true(json_is_true(json_object_get(doc, "needsAttention")));
	json_decref(doc);
}

static void test_source_status__json(void **state)
{
	struct fixture f;
	json_t *doc, *agent;

	(void)state;
	healthy(&f);
	doc = ds_source_status_json(&f.v);
	assert_non_null(doc);
	assert_false(json_is_true(json_object_get(doc, "needsAttention")));
	assert_null(json_object_get(doc, "attention"));
	agent = json_object_get(doc, "agent");
	assert_true(json_is_true(json_object_get(agent, "running")));
	assert_true(json_is_true(json_object_get(agent, "connected")));
	assert_int_equal(json_integer_value(json_object_get(agent, "pid")), 4242);
	assert_string_equal(json_string_value(json_object_get(agent, "endpoint")),
			    "tcp://target:7450");
	assert_int_equal(json_integer_value(json_object_get(doc, "ackedSeq")), 3);
	assert_int_equal(json_array_size(json_object_get(doc, "kinds")), 1);
	assert_string_equal(json_string_value(json_object_get(
				json_array_get(json_object_get(doc, "kinds"), 0), "kind")),
			    "ConfigMap");
	json_decref(doc);
	/* Not running: never shown as connected, whatever agent.json last said. */
	f.v.running = false;
	doc = ds_source_status_json(&f.v);
	agent = json_object_get(doc, "agent");
	assert_false(json_is_true(json_object_get(agent, "connected")));
	assert_true(json_is_true(json_object_get(doc, "needsAttention")));
	assert_string_equal(json_string_value(json_object_get(doc, "attention")),
			    "the agent is not running");
	json_decref(doc);
	/* No agent.json: the agent has only running and connected. */
	f.v.as = NULL;
	doc = ds_source_status_json(&f.v);
	agent = json_object_get(doc, "agent");
	assert_null(json_object_get(agent, "pid"));
	assert_int_equal(json_object_size(agent), 2);
	json_decref(doc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_source_status__attention),
	    cmocka_unit_test(test_source_status__json),
	    cmocka_unit_test(test_source_status__json_refusals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
